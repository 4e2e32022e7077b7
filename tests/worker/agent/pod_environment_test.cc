// PodDefaultsFrom: what an agent takes from the environment a Kubernetes pod gives it.

#include "worker/agent/pod_environment.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

namespace cohort::agent {
namespace {

const std::vector<std::string> kNoDevices = {"null", "zero", "shm", "pts"};
const std::vector<std::string> kTwoGpus = {"null", "nvidia0", "nvidia1", "nvidiactl",
                                           "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps"};

TEST_CASE("Outside a pod nothing is taken from the environment", "[pod_environment]") {
  PodDefaults d = PodDefaultsFrom({{"HOME", "/root"}, {"PATH", "/usr/bin"}}, kTwoGpus);
  CHECK_FALSE(d.name.has_value());
  CHECK_FALSE(d.advertise_address.has_value());
  // GPUs on a plain host are LibTorch's to count, not the environment's.
  CHECK_FALSE(d.gpus.has_value());
  CHECK(d.notes.empty());
  CHECK(d.warnings.empty());
  CHECK(GpusToAdvertise(2, d, nullptr) == 2);
}

TEST_CASE("A pod's node name and IP become the worker name and advertised address",
          "[pod_environment]") {
  PodDefaults d = PodDefaultsFrom({{"NODE_NAME", "gke-pool-a-3f2c"},
                                   {"POD_IP", "10.4.2.17"},
                                   {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}},
                                  kNoDevices);
  CHECK(d.name == "gke-pool-a-3f2c");
  CHECK(d.advertise_address == "10.4.2.17");
  CHECK_FALSE(d.gpus.has_value());  // a CPU pod: no GPU devices mounted
  REQUIRE(d.notes.size() == 2);
  CHECK(d.notes[0] == "worker name gke-pool-a-3f2c (NODE_NAME)");
  CHECK(d.notes[1] == "advertising 10.4.2.17 (POD_IP)");
  CHECK(d.warnings.empty());
}

TEST_CASE("IPv6 pod addresses are advertised as they are", "[pod_environment]") {
  PodDefaults d = PodDefaultsFrom({{"POD_IP", "fd00:10:244::5"}}, kNoDevices);
  CHECK(d.advertise_address == "fd00:10:244::5");
}

TEST_CASE("Values that cannot be used are ignored with a warning naming the variable",
          "[pod_environment]") {
  std::string long_name(64, 'n');
  PodDefaults d = PodDefaultsFrom({{"NODE_NAME", long_name}, {"POD_IP", "not-an-ip"}}, kNoDevices);
  CHECK_FALSE(d.name.has_value());
  CHECK_FALSE(d.advertise_address.has_value());
  REQUIRE(d.warnings.size() == 2);
  CHECK(d.warnings[0].find("NODE_NAME '" + long_name + "' is not a valid worker name") == 0);
  CHECK(d.warnings[1] == "POD_IP 'not-an-ip' is not an IP address: ignored");

  d = PodDefaultsFrom({{"NODE_NAME", "node/with/slashes"}, {"POD_IP", "10.0.0.300"}}, kNoDevices);
  CHECK_FALSE(d.name.has_value());
  CHECK_FALSE(d.advertise_address.has_value());
  CHECK(d.warnings.size() == 2);
}

TEST_CASE("Empty or blank variables count as unset", "[pod_environment]") {
  PodDefaults d = PodDefaultsFrom({{"NODE_NAME", ""}, {"POD_IP", "  "}, {"NVIDIA_VISIBLE_DEVICES", ""}},
                                  kTwoGpus);
  CHECK_FALSE(d.name.has_value());
  CHECK_FALSE(d.advertise_address.has_value());
  CHECK_FALSE(d.gpus.has_value());
  CHECK(d.warnings.empty());
}

TEST_CASE("The device plugin's GPU list gives the GPU count", "[pod_environment]") {
  SECTION("UUIDs") {
    PodDefaults d = PodDefaultsFrom(
        {{"NVIDIA_VISIBLE_DEVICES", "GPU-8f6a2c1e-0000-1111-2222-333344445555,GPU-1b2c3d4e-aaaa-bbbb-cccc-ddddeeeeffff"}},
        kNoDevices);
    CHECK(d.gpus == 2);
    CHECK(d.notes.back() == "2 GPUs (NVIDIA_VISIBLE_DEVICES)");
  }
  SECTION("indices") {
    CHECK(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "0,1,2,3"}}, kNoDevices).gpus == 4);
    CHECK(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "3"}}, kNoDevices).gpus == 1);
  }
  SECTION("MIG devices, one rank each") {
    CHECK(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "MIG-4f5e6d7c-1111-2222-3333-444455556666"}},
                          kNoDevices).gpus == 1);
  }
  SECTION("none") {
    PodDefaults d = PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "none"}}, kTwoGpus);
    CHECK(d.gpus == 0);
  }
  SECTION("void: the NVIDIA runtime was not asked for GPUs") {
    CHECK_FALSE(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "void"}}, kTwoGpus).gpus.has_value());
  }
}

TEST_CASE("`all` and the volume-mounts strategy count the GPU devices present",
          "[pod_environment]") {
  CHECK(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "all"}}, kTwoGpus).gpus == 2);
  CHECK(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "all"}}, kNoDevices).gpus == 0);
  PodDefaults d = PodDefaultsFrom(
      {{"NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices"}}, kTwoGpus);
  CHECK(d.gpus == 2);
  CHECK(d.notes.back() ==
        "2 GPUs (/dev/nvidiaN present, NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices)");
  // nvidiactl, nvidia-uvm and friends are not GPUs.
  CHECK(PodDefaultsFrom({{"NVIDIA_VISIBLE_DEVICES", "all"}},
                        {"nvidiactl", "nvidia-uvm", "nvidia-modeset", "nvidia"}).gpus == 0);
}

TEST_CASE("In a pod without the variable, GPU devices that are present are counted",
          "[pod_environment]") {
  CHECK(PodDefaultsFrom({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}}, kTwoGpus).gpus == 2);
  CHECK_FALSE(PodDefaultsFrom({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}}, kNoDevices).gpus.has_value());
}

TEST_CASE("The GPUs advertised are LibTorch's, never more than the pod was given",
          "[pod_environment]") {
  PodDefaults pod;
  pod.gpus = 8;
  std::string warning;
  CHECK(GpusToAdvertise(8, pod, &warning) == 8);
  CHECK(warning.empty());

  CHECK(GpusToAdvertise(0, pod, &warning) == 0);
  CHECK(warning ==
        "the pod was given 8 GPUs but LibTorch sees 0: is this the CUDA image (cohort-cuda), "
        "and is the driver mounted? Advertising the 0 it sees");

  pod.gpus = 2;
  warning.clear();
  CHECK(GpusToAdvertise(4, pod, &warning) == 2);
  CHECK(warning == "LibTorch sees 4 GPUs but the pod was given 2: advertising 2");

  pod.gpus.reset();
  CHECK(GpusToAdvertise(3, pod, nullptr) == 3);
}

TEST_CASE("ProcessEnvironment and DeviceNames read the real process", "[pod_environment]") {
  setenv("COHORT_POD_ENVIRONMENT_TEST", "a=b", 1);
  Environment env = ProcessEnvironment();
  CHECK(env["COHORT_POD_ENVIRONMENT_TEST"] == "a=b");
  unsetenv("COHORT_POD_ENVIRONMENT_TEST");

  std::vector<std::string> dev = DeviceNames("/dev");
  CHECK(std::find(dev.begin(), dev.end(), "null") != dev.end());
  CHECK(DeviceNames("/no/such/directory").empty());
}

}  // namespace
}  // namespace cohort::agent
