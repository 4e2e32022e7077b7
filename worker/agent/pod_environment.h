#pragma once

// What a Kubernetes pod tells the agent about itself, as defaults for cohort-worker's
// flags (deploy/k8s/base/agent-daemonset.yaml sets the first two):
//
//   NODE_NAME               downward API spec.nodeName   -> --name (one agent per node)
//   POD_IP                  downward API status.podIP    -> --advertise-address: the
//                           address other pods' ranks reach this one at (Gloo, NCCL)
//   NVIDIA_VISIBLE_DEVICES  set by the NVIDIA device plugin to the GPUs it assigned
//                           ("GPU-<uuid>,..." or indices; "all" or a path: count the
//                           /dev/nvidiaN present; "none": none)
//
// Flags given on the command line win. Outside a pod none of these is set and every
// field stays empty: cohort-worker keeps its own defaults (the host name, the local
// address that routes to the coordinator, every GPU LibTorch sees).
//
// PodDefaultsFrom is a pure function of its inputs, so it is tested without a pod;
// ProcessEnvironment() and DeviceNames() read the real ones. Torch-free.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort::agent {

using Environment = std::map<std::string, std::string>;

struct PodDefaults {
  std::optional<std::string> name;
  std::optional<std::string> advertise_address;
  // How many GPUs the pod was given; empty when the environment does not say.
  std::optional<int> gpus;
  // For the agent's log: each value taken and the variable it came from; each variable
  // that was set but could not be used, and why (the value is then ignored).
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

// `env`: the process environment. `dev_names`: the entries of /dev ("nvidia0",
// "nvidiactl", ...), consulted only when the environment says the GPUs are those
// present.
PodDefaults PodDefaultsFrom(const Environment& env, const std::vector<std::string>& dev_names);

// How many of the `detected` GPUs (what LibTorch sees) the agent advertises: all of
// them, or the pod's count when the pod was given fewer. Sets `*warning` (when not
// null) where the two disagree, e.g. a pod given GPUs running a CPU-only LibTorch.
int GpusToAdvertise(int detected, const PodDefaults& pod, std::string* warning);

Environment ProcessEnvironment();
// Names in `dir`; empty when it cannot be read.
std::vector<std::string> DeviceNames(const std::string& dir = "/dev");

}  // namespace cohort::agent
