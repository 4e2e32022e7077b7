#pragma once

// For fuzz targets whose parser reads a file by path (memory-mapped, as the
// coordinator and the trainer read them): the input written to one file per process,
// rewritten for every input, on tmpfs when there is one.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cohort::fuzz {

// Writes `data` to a file named ".../cohort-fuzz-<pid><suffix>" and returns its path.
inline const std::string& WriteInput(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [suffix] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/cohort-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace cohort::fuzz
