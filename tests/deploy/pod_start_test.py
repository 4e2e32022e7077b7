"""The rendered manifests start the real binaries: each container's command and args, as
the kubelet would run them, against the binaries of this build.

For the coordinator StatefulSet and the agent DaemonSet of each overlay, this test
builds what the kubelet would: the environment (the ConfigMap through envFrom, the
downward API's NODE_NAME, POD_IP and limits.cpu), the argv (command + args, $(VAR)
expanded), and runs it on loopback: the Service DNS name becomes 127.0.0.1 and a free
port, paths under /var/lib/cohort a temporary directory, tini (not installed here) is
left out, and the Secret cohort-secrets is a directory of files made for the test (a
token file, a worker token, a CA and the coordinator's certificate from the openssl
CLI). Then it checks what a cluster would see: the coordinator answers the native gRPC
probe (grpc.health.v1, with Python's grpcio) on the port the probes name, the agent
answers its readiness and liveness probes (its own --health-listen port), the agent
registers under the node's name with the pod's IP (over TLS, with the worker token),
and both stop cleanly on SIGTERM within the pod's terminationGracePeriodSeconds. A
flag renamed in a binary but not in the manifests fails here.

Run: .venv/bin/python tests/deploy/pod_start_test.py SERVER WORKER CLIENT
(ctest: deploy_pod_start, with the binaries of the build).
"""

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifests_test as m  # noqa: E402

PROBE = os.path.join(m.ROOT, "tests", "integration", "grpc_probe.py")
BINARIES = {}
NODE_NAME = "node-pool-a-1"
POD_IP = "127.0.0.2"  # loopback, but not the address that routes to the coordinator


def FreePort():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ADMIN_TOKEN = "pod-start-admin-token-5e1a9c"
WORKER_TOKEN = "pod-start-worker-token-7b3d2f"


def MakeSecrets(directory):
    """The keys of the Secret cohort-secrets (docs/kubernetes.md, section 3) as files."""
    os.makedirs(directory)
    def Run(*argv):
        subprocess.run(["openssl", *argv], check=True, capture_output=True, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    path = lambda name: os.path.join(directory, name)
    Run("req", "-x509", *ec, "-keyout", path("ca.key"), "-out", path("ca.crt"), "-days", "1",
        "-subj", "/CN=cohort-test-ca")
    Run("req", *ec, "-keyout", path("tls.key"), "-out", path("tls.csr"), "-subj", "/CN=cohort-coordinator")
    with open(path("san.ext"), "w") as f:
        f.write("subjectAltName=DNS:cohort-coordinator,IP:127.0.0.1\n")
    Run("x509", "-req", "-in", path("tls.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
        "-CAcreateserial", "-out", path("tls.crt"), "-days", "1", "-extfile", path("san.ext"))
    with open(path("tokens"), "w") as f:
        f.write(f"{ADMIN_TOKEN} platform admin\n{WORKER_TOKEN} nodes worker\n")
    with open(path("worker-token"), "w") as f:
        f.write(WORKER_TOKEN + "\n")
    return directory


def Expand(text, env):
    """Kubernetes' $(VAR) expansion: known variables are replaced, others left as they are."""
    return re.sub(r"\$\((\w+)\)", lambda x: env.get(x.group(1), x.group(0)), text)


def ContainerEnvironment(docs, workload, container):
    env = {}
    for source in container.get("envFrom", []):
        env.update(m.Find(docs, "ConfigMap", source["configMapRef"]["name"]).get("data", {}))
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = Expand(e["value"], env)
            continue
        ref = e["valueFrom"]
        if "fieldRef" in ref:
            env[e["name"]] = {"spec.nodeName": NODE_NAME, "status.podIP": POD_IP,
                              "metadata.name": "pod-0"}[ref["fieldRef"]["fieldPath"]]
        elif "resourceFieldRef" in ref:
            r = ref["resourceFieldRef"]
            value = m.Quantity(container["resources"]["limits"][r["resource"].split(".", 1)[1]])
            env[e["name"]] = str(math.ceil(value / m.Quantity(r.get("divisor", "1"))))
    return env


def Argv(container, env, replacements):
    argv = [Expand(a, env) for a in container.get("command", []) + container.get("args", [])]
    if argv[:2] == ["/usr/bin/tini", "--"]:
        argv = argv[2:]
    argv[0] = BINARIES[argv[0]]
    out = []
    for a in argv:
        for pattern, value in replacements:
            a = re.sub(pattern, value, a)
        out.append(a)
    return out


class Pod:
    def __init__(self, argv, env, log):
        self.log = log
        with open(log, "w") as f:
            self.process = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def Output(self):
        with open(self.log) as f:
            return f.read()

    def Stop(self, grace):
        """SIGTERM, as the kubelet sends; the exit status, or None when it outlived `grace`."""
        if self.process.poll() is not None:
            return self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def Kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def WaitFor(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


class PodStartTest(unittest.TestCase):
    def Start(self, overlay):
        docs = m.Rendered.Get(overlay)
        tmp = tempfile.mkdtemp(prefix=f"cohort-pod-{overlay}-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        port = FreePort()
        address = f"127.0.0.1:{port}"
        health_port = FreePort()
        secrets = MakeSecrets(os.path.join(tmp, "secrets"))
        self.client_flags = ["--token", ADMIN_TOKEN, "--tls-ca", os.path.join(secrets, "ca.crt")]
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_")}
        # The coordinator's Service name, wherever it appears, becomes loopback.
        service = r"cohort-coordinator(\.[\w.-]+)?:7070"
        replacements = [(r"^--listen=0\.0\.0\.0:\d+$", f"--listen={address}"),
                        (r"^--health-listen=0\.0\.0\.0:\d+$", f"--health-listen=127.0.0.1:{health_port}"),
                        (r"/etc/cohort/secrets", secrets),
                        (r"/var/lib/cohort", tmp), (service, address)]

        sts = m.Find(docs, "StatefulSet", "cohort-coordinator")
        c = m.PodSpec(sts)["containers"][0]
        env = ContainerEnvironment(docs, sts, c)
        argv = Argv(c, env, replacements)
        self.assertIn(f"--listen={address}", argv, "the coordinator's --listen was not found")
        # The kubelet probes the port the probes name: the --health-listen one here.
        probe_ports = {c[p]["grpc"]["port"] for p in ("readinessProbe", "livenessProbe")}
        self.assertEqual(len(probe_ports), 1)
        self.assertIn(f"--health-listen=0.0.0.0:{probe_ports.pop()}", c["args"])
        self.probe_address = f"127.0.0.1:{health_port}"
        server = Pod(argv, {**base_env, **env}, os.path.join(tmp, "coordinator.log"))
        self.addCleanup(server.Kill)
        grace = m.PodSpec(sts).get("terminationGracePeriodSeconds", 30)

        ds = m.Find(docs, "DaemonSet", "cohort-agent")
        a = m.PodSpec(ds)["containers"][0]
        agent_env = {k: re.sub(service, address, v) for k, v in ContainerEnvironment(docs, ds, a).items()}
        self.assertEqual(agent_env.get("COHORT_COORDINATOR"), address)
        # The agent's probes, too, ask its --health-listen port (a port of its own here).
        agent_probe_ports = {a[p]["grpc"]["port"] for p in ("readinessProbe", "livenessProbe")}
        self.assertEqual(len(agent_probe_ports), 1)
        self.assertIn(f"--health-listen=0.0.0.0:{agent_probe_ports.pop()}", a["args"])
        agent_health_port = FreePort()
        self.agent_probe_address = f"127.0.0.1:{agent_health_port}"
        self.agent_services = {p: a[p]["grpc"].get("service", "") for p in ("readinessProbe", "livenessProbe")}
        agent_argv = Argv(a, agent_env, [(r"^--health-listen=0\.0\.0\.0:\d+$",
                                          f"--health-listen={self.agent_probe_address}")] + replacements)
        return docs, tmp, address, server, grace, (agent_argv, {**base_env, **agent_env}), \
            m.PodSpec(ds).get("terminationGracePeriodSeconds", 30)

    def Probe(self, address, service=""):
        r = subprocess.run([sys.executable, PROBE, "health", address, service], capture_output=True,
                           text=True, timeout=30)
        return r.stdout.strip()

    def Workers(self, address):
        r = subprocess.run([BINARIES["cohort"], "--coordinator", address, *self.client_flags,
                            "workers", "-o", "json"],
                           capture_output=True, text=True, timeout=30)
        return {w["name"]: w for w in json.loads(r.stdout)} if r.returncode == 0 else {}

    def test_cpu_overlay_coordinator_and_agent(self):
        docs, tmp, address, server, grace, (agent_argv, agent_env), agent_grace = self.Start("cpu")
        self.assertEqual(WaitFor(lambda: self.Probe(self.probe_address) == "SERVING", 30), True,
                         server.Output())
        agent = Pod(agent_argv, agent_env, os.path.join(tmp, "agent.log"))
        self.addCleanup(agent.Kill)
        worker = WaitFor(lambda: self.Workers(address).get(NODE_NAME), 30)
        self.assertTrue(worker, f"{NODE_NAME} did not register:\n{agent.Output()}")
        self.assertEqual(worker["address"], POD_IP)
        self.assertEqual(worker["state"], "alive")
        limit = m.PodSpec(m.Find(docs, "DaemonSet", "cohort-agent"))["containers"][0]["resources"]["limits"]["cpu"]
        self.assertEqual(worker["cpu_slots"], math.ceil(m.Quantity(limit)))
        self.assertTrue(os.path.isdir(os.path.join(tmp, "data")), "no --data-dir under the volume")
        # The agent answers its readiness and liveness probes, as the kubelet asks them.
        for probe, service in self.agent_services.items():
            with self.subTest(probe=probe):
                self.assertEqual(WaitFor(lambda: self.Probe(self.agent_probe_address, service) == "SERVING", 30),
                                 True, agent.Output())

        self.assertEqual(agent.Stop(agent_grace), 0, agent.Output())
        # Gone with its process: the probes fail.
        self.assertEqual(self.Probe(self.agent_probe_address, self.agent_services["livenessProbe"]), "UNAVAILABLE")
        self.assertEqual(self.Workers(address)[NODE_NAME]["state"], "left")
        self.assertEqual(server.Stop(grace), 0, server.Output())

    def test_gpu_overlay_coordinator_answers_and_agent_says_why_it_cannot_run_without_gpus(self):
        docs, tmp, address, server, grace, (agent_argv, agent_env), agent_grace = self.Start("gpu")
        self.assertEqual(WaitFor(lambda: self.Probe(self.probe_address) == "SERVING", 30), True,
                         server.Output())
        # What the device plugin sets for two GPUs.
        agent_env["NVIDIA_VISIBLE_DEVICES"] = "GPU-0a0a0a0a-0000-0000-0000-000000000000,GPU-1b1b1b1b-0000-0000-0000-000000000000"
        agent = Pod(agent_argv, agent_env, os.path.join(tmp, "agent.log"))
        self.addCleanup(agent.Kill)
        registered = WaitFor(lambda: self.Workers(address).get(NODE_NAME) or agent.process.poll() is not None, 60)
        self.assertTrue(registered, agent.Output())
        worker = self.Workers(address).get(NODE_NAME)
        if worker is None:
            # LibTorch sees no GPU here and the gpu overlay offers no CPU slots: the agent
            # exits (the pod would crash-loop) saying why, instead of idling.
            self.assertEqual(agent.process.wait(timeout=10), 1, agent.Output())
            self.assertIn("the pod was given 2 GPUs but LibTorch sees 0", agent.Output())
            self.assertIn("no CPU slots and no GPUs", agent.Output())
        else:
            self.assertEqual(worker["address"], POD_IP)
            self.assertEqual(worker["cpu_slots"], 0)
            self.assertLessEqual(len(worker["gpus"]), 2)
            self.assertEqual(agent.Stop(agent_grace), 0, agent.Output())
        self.assertEqual(server.Stop(grace), 0, server.Output())


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit("usage: pod_start_test.py COHORT_SERVER COHORT_WORKER COHORT_CLIENT")
    BINARIES.update({"cohort-server": sys.argv[1], "cohort-worker": sys.argv[2], "cohort": sys.argv[3]})
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)
