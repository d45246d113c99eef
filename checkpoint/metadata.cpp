// JSON form of checkpoint_metadata and the rank-0 merge of the ranks' indexes.
#include "checkpoint/metadata.hpp"

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::checkpoint {

nlohmann::json to_json(const checkpoint_metadata& m) {
  nlohmann::json j;
  j["format"] = format_name;
  j["version"] = format_version;
  j["iteration"] = m.iteration;
  j["world_size"] = m.world_size;
  j["files"] = nlohmann::json::object();
  for (const auto& [name, f] : m.files) j["files"][name] = {{"size", f.size}, {"rank", f.rank}};
  j["tensors"] = nlohmann::json::object();
  for (const auto& [name, t] : m.tensors) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const auto& p : t.pieces) {
      nlohmann::json pj = {{"offset", p.offset}, {"shape", p.shape}, {"file", p.file},
                           {"byte_offset", p.byte_offset}, {"length", p.length},
                           {"crc32", p.crc32}};
      pj["flat_range"] = p.flat_range ? nlohmann::json::array({p.flat_range->first,
                                                               p.flat_range->second})
                                      : nlohmann::json(nullptr);
      pieces.push_back(std::move(pj));
    }
    j["tensors"][name] = {{"dtype", t.dtype}, {"global_shape", t.global_shape},
                          {"pieces", std::move(pieces)}};
  }
  return j;
}

checkpoint_metadata metadata_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    if (j.at("format") != format_name || j.at("version").get<int>() > format_version)
      throw checkpoint_error(source + " is not a " + std::string(format_name) + " version " +
                             std::to_string(format_version) + " metadata file");
    checkpoint_metadata m;
    m.iteration = j.at("iteration").get<std::int64_t>();
    m.world_size = j.at("world_size").get<int>();
    for (const auto& [name, f] : j.at("files").items())
      m.files[name] = {f.at("size").get<std::int64_t>(), f.at("rank").get<int>()};
    for (const auto& [name, t] : j.at("tensors").items()) {
      tensor_record r;
      r.dtype = t.at("dtype").get<std::string>();
      if (r.dtype != "float32")
        throw checkpoint_error(source + ": tensor " + name + " has dtype " + r.dtype +
                               "; only float32 is supported");
      r.global_shape = t.at("global_shape").get<std::vector<std::int64_t>>();
      for (const auto& pj : t.at("pieces")) {
        piece_record p;
        p.offset = pj.at("offset").get<std::vector<std::int64_t>>();
        p.shape = pj.at("shape").get<std::vector<std::int64_t>>();
        if (!pj.at("flat_range").is_null())
          p.flat_range = std::make_pair(pj["flat_range"].at(0).get<std::int64_t>(),
                                        pj["flat_range"].at(1).get<std::int64_t>());
        p.file = pj.at("file").get<std::string>();
        p.byte_offset = pj.at("byte_offset").get<std::int64_t>();
        p.length = pj.at("length").get<std::int64_t>();
        p.crc32 = pj.at("crc32").get<std::uint32_t>();
        r.pieces.push_back(std::move(p));
      }
      m.tensors[name] = std::move(r);
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw checkpoint_error(source + " is malformed (" + e.what() + "); " +
                           damaged_checkpoint_fix);
  }
}

void merge_metadata(checkpoint_metadata& into, const checkpoint_metadata& part) {
  for (const auto& [name, f] : part.files) into.files[name] = f;
  for (const auto& [name, t] : part.tensors) {
    auto [it, fresh] = into.tensors.try_emplace(name, t);
    if (fresh) continue;
    if (it->second.global_shape != t.global_shape)
      throw checkpoint_error("tensor " + name + " was saved with different global shapes by " +
                             "different ranks; every rank must describe the same global tensor");
    for (const auto& p : t.pieces) {
      bool duplicate = false;
      for (const auto& q : it->second.pieces)
        duplicate = duplicate ||
                    (q.offset == p.offset && q.shape == p.shape && q.flat_range == p.flat_range);
      if (!duplicate) it->second.pieces.push_back(p);
    }
  }
}

}  // namespace mactor::checkpoint
