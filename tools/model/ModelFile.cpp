// ModelFile.cpp - loadModelFile: GGUF by its magic, otherwise llama2.c.
#include "tools/model/ModelFile.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "sinter/Status.h"
#include "tools/model/GgufModel.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/MappedFile.h"

namespace sinter::model {

absl::StatusOr<ModelWeights> loadModelFile(const std::string &path, bool *isGguf) {
  bool gguf = false;
  {
    SINTER_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    gguf = file->bytes().size() >= 4 && std::memcmp(file->bytes().data(), "GGUF", 4) == 0;
  }
  if (isGguf)
    *isGguf = gguf;
  if (gguf)
    return loadGguf(path);
  absl::StatusOr<ModelWeights> loaded = loadLlama2c(path);
  if (!loaded.ok())
    return absl::Status(loaded.status().code(),
                        absl::StrCat("not a GGUF file (no \"GGUF\" magic), and as a llama2.c "
                                     "checkpoint: ",
                                     loaded.status().message()));
  return loaded;
}

} // namespace sinter::model
