#pragma once

// Plain-text tables for terminal output: a header row and left-aligned columns padded
// to their widest cell.

#include <string>
#include <vector>

namespace cohort::client {

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace cohort::client
