"""Measuring processes for bench/run.py: CPU usage, exit codes, the machine's load.

Standard library only; Linux only (/proc).
"""
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time

QUIET_BUSY_SHARE = 0.10
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# When set, Run starts each process in a session of its own whose autogroup gets this
# nice value. With autogroup scheduling (Linux's default) a process's nice only orders
# it within its session; between sessions the groups' nice values decide, so a
# benchmark that is to take the CPU from builds in other sessions needs both.
SESSION_NICE = None


def CpuInfoField(name):
    """The first value of field `name` in /proc/cpuinfo; None where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return None


def CpuModel():
    return CpuInfoField("model name") or platform.processor() or "unknown"


def MachineTicks():
    """(busy, total) clock ticks of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def WaitForQuiet(max_wait_s):
    """Waits until a one-second sample shows the machine under QUIET_BUSY_SHARE busy."""
    deadline = time.monotonic() + max_wait_s
    while True:
        busy0, total0 = MachineTicks()
        time.sleep(1.0)
        busy1, total1 = MachineTicks()
        share = (busy1 - busy0) / max(total1 - total0, 1)
        if share < QUIET_BUSY_SHARE or time.monotonic() >= deadline:
            return share
        print(f"  waiting for a quiet machine ({share:.0%} busy)", file=sys.stderr)


def ProcessCpuSeconds(pid):
    """(user, sys) CPU seconds, every thread, of a live process; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS)


class Run:
    """Processes started together; their stdout lines, exit codes and CPU usage.

    `on_line(index, line)` is called from a reader thread per process. CPU usage comes
    from os.wait4, so it covers each process and the children it waited for."""

    def __init__(self, commands, envs, on_line=None):
        self.on_line = on_line or (lambda index, line: None)
        self.lines = [[] for _ in commands]
        self.stderr = [tempfile.TemporaryFile(mode="w+") for _ in commands]
        self.busy0, self.total0 = MachineTicks()
        self.processes = []
        try:
            for command, env, err in zip(commands, envs, self.stderr):
                if SESSION_NICE is not None:  # the shell sets its new group's nice, execs
                    command = ["/bin/sh", "-c", f'echo {SESSION_NICE} > /proc/self/autogroup'
                               ' 2>/dev/null; exec "$@"', "sh"] + command
                self.processes.append(subprocess.Popen(
                    command, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                    start_new_session=SESSION_NICE is not None))
        except OSError:
            self.Kill()
            raise
        self.readers = [threading.Thread(target=self._Read, args=(i,), daemon=True)
                        for i in range(len(self.processes))]
        for reader in self.readers:
            reader.start()

    def _Read(self, index):
        for line in self.processes[index].stdout:
            self.lines[index].append(line)
            self.on_line(index, line)

    def Kill(self):
        # os.kill, not Popen.kill: that polls, which would reap the process and lose the
        # usage os.wait4 reports. A process not yet reaped is alive or a zombie.
        for process in self.processes:
            if process.returncode is None:
                os.kill(process.pid, signal.SIGKILL)

    def Wait(self, timeout_s):
        """Reaps every process; fills returncode, usage (os.wait4's), other_load (the
        share of the machine that other processes used meanwhile) and the tail of each
        stderr. Kills the others as soon as one fails (ranks of a job would wait for it
        forever), and all after timeout_s."""
        self.usage = [None] * len(self.processes)
        self.timed_out = False
        self.first_failed = None  # the index of the process that failed first
        pending = set(range(len(self.processes)))
        try:
            self._Reap(pending, time.monotonic() + timeout_s)
        except BaseException:  # Ctrl-C: no process may outlive the runner
            self.Kill()
            for i in pending:
                os.waitpid(self.processes[i].pid, 0)
            raise
        for reader, process in zip(self.readers, self.processes):
            reader.join()
            process.stdout.close()
        self.stderr_tails = []
        for err in self.stderr:
            err.seek(0)
            self.stderr_tails.append(" | ".join(err.read().strip().splitlines()[-3:]))
            err.close()
        busy1, total1 = MachineTicks()
        ours = sum(u.ru_utime + u.ru_stime for u in self.usage)
        machine_s = (total1 - self.total0) / CLOCK_TICKS  # all CPUs
        self.other_load = max(0.0, ((busy1 - self.busy0) / CLOCK_TICKS - ours)
                              / max(machine_s, 1e-9))

    def _Reap(self, pending, deadline):
        while pending:
            for i in list(pending):
                pid, status, usage = os.wait4(self.processes[i].pid, os.WNOHANG)
                if pid:
                    self.processes[i].returncode = os.waitstatus_to_exitcode(status)
                    self.usage[i] = usage
                    pending.discard(i)
                    if status != 0 and self.first_failed is None:
                        self.first_failed = i
                        self.Kill()
            if pending and time.monotonic() > deadline and not self.timed_out:
                self.timed_out = True
                self.Kill()
            time.sleep(0.02)

    def Failure(self):
        """None when every process exited 0, else a one-line reason."""
        if self.timed_out:
            return "timed out"
        i = self.first_failed
        if i is None:
            return None
        return (f"process {i} exited with {self.processes[i].returncode}: "
                f"{self.stderr_tails[i]}")[:300]
