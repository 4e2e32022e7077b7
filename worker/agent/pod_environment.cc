#include "worker/agent/pod_environment.h"

#include <arpa/inet.h>
#include <dirent.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/names.h"

extern char** environ;

namespace cohort::agent {
namespace {

std::optional<std::string> Get(const Environment& env, const std::string& key) {
  auto it = env.find(key);
  if (it == env.end()) return std::nullopt;
  std::string value(absl::StripAsciiWhitespace(it->second));
  if (value.empty()) return std::nullopt;
  return value;
}

bool IsIpAddress(const std::string& text) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

// /dev/nvidia0, /dev/nvidia1, ...: one per GPU (nvidiactl, nvidia-uvm are not GPUs).
int CountGpuDevices(const std::vector<std::string>& dev_names) {
  return static_cast<int>(std::count_if(dev_names.begin(), dev_names.end(), [](const std::string& n) {
    if (n.size() <= 6 || n.compare(0, 6, "nvidia") != 0) return false;
    return std::all_of(n.begin() + 6, n.end(), [](unsigned char c) { return std::isdigit(c); });
  }));
}

void ReadGpus(const Environment& env, const std::vector<std::string>& dev_names,
              PodDefaults& out) {
  std::optional<std::string> visible = Get(env, "NVIDIA_VISIBLE_DEVICES");
  bool in_pod = Get(env, "KUBERNETES_SERVICE_HOST").has_value();
  if (visible && *visible == "none") {
    out.gpus = 0;
    out.notes.push_back("no GPUs (NVIDIA_VISIBLE_DEVICES=none)");
    return;
  }
  // "all", or the device plugin's volume-mounts strategy (a path): the container
  // runtime mounted exactly the GPUs given, so count those present.
  if ((visible && (*visible == "all" || (*visible)[0] == '/')) ||
      (in_pod && (!visible || *visible == "void"))) {
    int present = CountGpuDevices(dev_names);
    if (visible || present > 0) {
      out.gpus = present;
      out.notes.push_back(absl::StrCat(present, " GPUs (/dev/nvidiaN present",
                                       visible ? absl::StrCat(", NVIDIA_VISIBLE_DEVICES=", *visible) : "",
                                       ")"));
    }
    return;
  }
  if (!visible || *visible == "void") return;
  std::vector<std::string> ids = absl::StrSplit(*visible, ',', absl::SkipWhitespace());
  out.gpus = static_cast<int>(ids.size());
  out.notes.push_back(absl::StrCat(ids.size(), " GPUs (NVIDIA_VISIBLE_DEVICES)"));
}

}  // namespace

PodDefaults PodDefaultsFrom(const Environment& env, const std::vector<std::string>& dev_names) {
  PodDefaults out;
  if (std::optional<std::string> node = Get(env, "NODE_NAME")) {
    if (CheckName(*node, "NODE_NAME").ok()) {
      out.name = *node;
      out.notes.push_back(absl::StrCat("worker name ", *node, " (NODE_NAME)"));
    } else {
      out.warnings.push_back(absl::StrCat(
          "NODE_NAME '", *node,
          "' is not a valid worker name (1-63 letters, digits, '.', '-', '_'): ignored; "
          "pass --name"));
    }
  }
  if (std::optional<std::string> ip = Get(env, "POD_IP")) {
    if (IsIpAddress(*ip)) {
      out.advertise_address = *ip;
      out.notes.push_back(absl::StrCat("advertising ", *ip, " (POD_IP)"));
    } else {
      out.warnings.push_back(
          absl::StrCat("POD_IP '", *ip, "' is not an IP address: ignored"));
    }
  }
  ReadGpus(env, dev_names, out);
  return out;
}

int GpusToAdvertise(int detected, const PodDefaults& pod, std::string* warning) {
  if (!pod.gpus || *pod.gpus == detected) return detected;
  if (warning != nullptr) {
    *warning = detected < *pod.gpus
                   ? absl::StrCat("the pod was given ", *pod.gpus, " GPUs but LibTorch sees ",
                                  detected,
                                  ": is this the CUDA image (cohort-cuda), and is the driver "
                                  "mounted? Advertising the ",
                                  detected, " it sees")
                   : absl::StrCat("LibTorch sees ", detected, " GPUs but the pod was given ",
                                  *pod.gpus, ": advertising ", *pod.gpus);
  }
  return std::min(detected, *pod.gpus);
}

Environment ProcessEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> DeviceNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* entry = readdir(d)) names.emplace_back(entry->d_name);
  closedir(d);
  return names;
}

}  // namespace cohort::agent
