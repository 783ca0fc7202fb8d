// Calibration inputs from a folder (quantize.h: open_calibration_folder).

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "onnx/import.h"
#include "quantize/quantize.h"

namespace kiln::planner::quantize {
namespace {

namespace fs = std::filesystem;

bool is_tensor_file(const fs::path& p) { return p.extension() == ".npy" || p.extension() == ".pb"; }

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, error)) entries.push_back(e.path());
  if (error) fail(dir.string(), ": cannot read the calibration folder (", error.message(), ")");
  std::sort(entries.begin(), entries.end());
  return entries;
}

class CalibrationFolder final : public CalibrationData {
 public:
  CalibrationFolder(std::vector<fs::path> items, bool subfolders) : items_(std::move(items)), subfolders_(subfolders) {}

  size_t size() const override { return items_.size(); }
  std::string describe(size_t index) const override { return items_.at(index).string(); }

  std::vector<HostTensor> item(size_t index, const std::vector<std::string>& input_names) override {
    const fs::path& item = items_.at(index);
    if (!subfolders_) {
      if (input_names.size() != 1) {
        fail(item.string(), ": the model takes ", input_names.size(),
             " inputs; give each sample a subfolder with one file per input");
      }
      return {read_tensor_file(item.string())};
    }
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < input_names.size(); ++i)
      inputs.push_back(read_tensor_file(input_file(item, input_names, i)));
    return inputs;
  }

 private:
  // The file of input `i` in a sample's folder: named after the input, or
  // input_<i>.
  static std::string input_file(const fs::path& dir, const std::vector<std::string>& names, size_t i) {
    for (const std::string& stem : {names[i], "input_" + std::to_string(i)}) {
      for (const char* ext : {".npy", ".pb"}) {
        const fs::path p = dir / (stem + ext);
        if (fs::is_regular_file(p)) return p.string();
      }
    }
    fail(dir.string(), ": no file for input ", i, " ('", names[i], "'): expected ", names[i], ".npy, ", names[i],
         ".pb or input_", i, ".npy / .pb");
  }

  std::vector<fs::path> items_;
  bool subfolders_;
};

}  // namespace

std::unique_ptr<CalibrationData> open_calibration_folder(const std::string& path) {
  if (!fs::is_directory(path)) fail(path, ": not a folder (calibration data is a folder of .npy or .pb files)");
  std::vector<fs::path> files, folders;
  for (const fs::path& p : sorted_entries(path)) {
    if (fs::is_directory(p)) {
      folders.push_back(p);
    } else if (is_tensor_file(p)) {
      files.push_back(p);
    }
  }
  if (!files.empty() && !folders.empty()) {
    fail(path, ": holds both files and subfolders; use files for a model of one input, or one subfolder per sample");
  }
  if (files.empty() && folders.empty()) fail(path, ": no .npy or .pb files and no subfolders");
  const bool subfolders = files.empty();
  return std::make_unique<CalibrationFolder>(subfolders ? folders : files, subfolders);
}

}  // namespace kiln::planner::quantize
