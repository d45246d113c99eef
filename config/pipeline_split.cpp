// Which transformer layers each (virtual) pipeline stage holds, as Megatron-Core's
// get_num_layers_to_build / get_transformer_layer_offset and PipelineParallelLayerLayout decide.
#include "config/pipeline_split.hpp"

#include <algorithm>
#include <regex>
#include <stdexcept>

namespace mactor::config {
namespace {

constexpr const char* layout_flag = "--pipeline-model-parallel-layout";

std::string str(std::int64_t v) { return std::to_string(v); }

// Replaces every match of `pattern` by its first group repeated (second group) times, in one
// left-to-right pass, as Python's re.sub does.
std::string unroll(const std::string& text, const std::regex& pattern) {
  std::string out;
  auto at = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
    const auto& m = *it;
    out.append(at, m[0].first);
    const long times = std::stol(m[2].str());
    for (long i = 0; i < times; ++i) out += m[1].str();
    at = m[0].second;
  }
  out.append(at, text.cend());
  return out;
}

// Layer counts per [pipeline rank][virtual stage] for the flag-driven splits (no layout).
std::vector<std::vector<int>> counts_from_flags(const pipeline_split_settings& s) {
  const int pp = s.pipeline_size, vp = s.virtual_size;
  std::vector<int> per_rank(std::size_t(pp), 0);
  if (s.first_stage_layers || s.last_stage_layers) {
    int rest = s.num_layers, middle = pp;
    if (s.first_stage_layers) rest -= *s.first_stage_layers, --middle;
    if (s.last_stage_layers) rest -= *s.last_stage_layers, --middle;
    if (middle > 0 && (rest < 0 || rest % middle != 0))
      throw std::invalid_argument("with --decoder-first/last-pipeline-num-layers the " + str(rest) + " layers left for the " +
                                  str(middle) + " middle pipeline stages do not divide evenly; change --num-layers or "
                                  "the first/last stage counts");
    std::fill(per_rank.begin(), per_rank.end(), middle > 0 ? rest / middle : 0);
    if (s.first_stage_layers) per_rank.front() = *s.first_stage_layers;
    if (s.last_stage_layers) per_rank.back() = *s.last_stage_layers;
  } else {
    const int total = s.num_layers + int(s.account_for_embedding) + int(s.account_for_loss);
    if (total % pp != 0)
      throw std::invalid_argument("--num-layers=" + str(s.num_layers) +
                                  (total != s.num_layers ? " plus the embedding/loss accounted as layers (" + str(total) + ")" : "") +
                                  " is not divisible by --pipeline-model-parallel-size=" + str(pp));
    std::fill(per_rank.begin(), per_rank.end(), total / pp);
  }
  std::vector<std::vector<int>> counts(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    if (per_rank[std::size_t(r)] % vp != 0)
      throw std::invalid_argument("pipeline rank " + str(r) + " holds " + str(per_rank[std::size_t(r)]) +
                                  " layers, which do not divide into its " + str(vp) + " virtual stages");
    counts[std::size_t(r)].assign(std::size_t(vp), per_rank[std::size_t(r)] / vp);
  }
  if (s.account_for_embedding) counts.front().front() -= 1;
  if (s.account_for_loss) counts.back().back() -= 1;
  if (counts.front().front() < 0 || counts.back().back() < 0)
    throw std::invalid_argument("the embedding/loss accounted as a layer leave no room in a stage of 0 layers; "
                                "give more --num-layers per stage");
  return counts;
}

int count_of(const std::string& stage, char c) { return int(std::count(stage.begin(), stage.end(), c)); }

// Megatron's validate_layer_layout, plus the vp the layout implies agreeing with the resolved one.
std::vector<std::vector<int>> counts_from_layout(const pipeline_split_settings& s) {
  const auto stages = parse_pipeline_layout(*s.layout);
  const int pp = s.pipeline_size, n = int(stages.size());
  if (n % pp != 0)
    throw std::invalid_argument(std::string(layout_flag) + " has " + str(n) + " stages, which is not divisible by "
                                "--pipeline-model-parallel-size=" + str(pp));
  const int vp = n / pp;
  if (vp != s.virtual_size)
    throw std::invalid_argument(std::string(layout_flag) + " has " + str(vp) + " stages per pipeline rank but the "
                                "virtual pipeline size is " + str(s.virtual_size));
  std::string flat;
  for (const auto& stage : stages) flat += stage;
  auto fail = [](const std::string& why) { throw std::invalid_argument(std::string(layout_flag) + ": " + why); };
  if (flat.empty() || flat.front() != 'E') fail("the first layer must be the embedding 'E'");
  if (flat.back() != 'L') fail("the last layer must be the loss 'L'");
  if (count_of(flat, 'E') != 1) fail("the embedding 'E' must appear exactly once");
  if (count_of(flat, 'L') != 1) fail("the loss 'L' must appear exactly once");
  if (count_of(flat, 't') != s.num_layers)
    fail("it places " + str(count_of(flat, 't')) + " transformer layers 't' but --num-layers is " + str(s.num_layers));
  if (count_of(flat, 'm') != s.mtp_num_layers)
    fail("it places " + str(count_of(flat, 'm')) + " MTP layers 'm' but --mtp-num-layers is " + str(s.mtp_num_layers));
  // Megatron-Core 0.15's restriction, which is also what mactor builds: every MTP layer after the
  // decoder layers, all in the last stage, together with the loss.
  if (const auto first_m = flat.find('m'); first_m != std::string::npos) {
    if (flat.find('t', first_m) != std::string::npos) fail("decoder layers 't' must be placed before the MTP layers 'm'");
    if (count_of(stages.back(), 'm') != s.mtp_num_layers || count_of(stages.back(), 'L') != 1)
      fail("the MTP layers 'm' must all be in the last stage, together with the loss 'L'");
  }
  std::vector<std::vector<int>> counts(static_cast<std::size_t>(pp), std::vector<int>(static_cast<std::size_t>(vp)));
  for (int i = 0; i < n; ++i) counts[std::size_t(i % pp)][std::size_t(i / pp)] = count_of(stages[std::size_t(i)], 't');
  return counts;
}

void check_settings(const pipeline_split_settings& s) {
  if (s.pipeline_size < 1 || s.virtual_size < 1 || s.num_layers < 0)
    throw std::invalid_argument("the pipeline split needs --pipeline-model-parallel-size >= 1, a virtual size >= 1 and "
                                "--num-layers >= 0");
  const bool uneven = s.first_stage_layers || s.last_stage_layers;
  if (s.layout && (uneven || s.account_for_embedding || s.account_for_loss))
    throw std::invalid_argument(std::string(layout_flag) + " cannot be combined with --decoder-first/last-pipeline-num-layers "
                                "or --account-for-embedding/loss-in-pipeline-split");
  if (uneven && (s.account_for_embedding || s.account_for_loss))
    throw std::invalid_argument("--decoder-first/last-pipeline-num-layers cannot be combined with "
                                "--account-for-embedding/loss-in-pipeline-split");
  for (const auto& [name, v] : {std::pair{"--decoder-first-pipeline-num-layers", s.first_stage_layers},
                                {"--decoder-last-pipeline-num-layers", s.last_stage_layers}})
    if (v && *v <= 0) throw std::invalid_argument(std::string(name) + "=" + str(*v) + " must be > 0");
}

// One stage's layer types for describe_pipeline_split, runs collapsed as Megatron prints them.
std::string stage_text(const pipeline_stage_span& span) {
  std::vector<std::string> parts;
  if (span.embedding) parts.push_back("embedding");
  if (span.layers() == 1) parts.push_back("decoder");
  if (span.layers() > 1) parts.push_back("decoder*" + str(span.layers()));
  if (span.loss) parts.push_back("loss");
  if (parts.empty()) return "(empty stage)";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

}  // namespace

pipeline_split_settings pipeline_split_settings::of(const megatron_args& a) {
  const auto& d = a.distributed;
  pipeline_split_settings s;
  s.num_layers = int(a.network_size.num_layers.value_or(a.network_size.decoder_num_layers.value_or(0)));
  s.pipeline_size = int(d.pipeline_model_parallel_size);
  s.virtual_size = int(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  if (d.decoder_first_pipeline_num_layers) s.first_stage_layers = int(*d.decoder_first_pipeline_num_layers);
  if (d.decoder_last_pipeline_num_layers) s.last_stage_layers = int(*d.decoder_last_pipeline_num_layers);
  s.account_for_embedding = d.account_for_embedding_in_pipeline_split;
  s.account_for_loss = d.account_for_loss_in_pipeline_split;
  s.layout = d.pipeline_model_parallel_layout;
  s.mtp_num_layers = int(a.network_size.mtp_num_layers.value_or(0));
  s.placement = placement_for_schedule(a.mactor.pipeline_schedule);
  return s;
}

std::vector<std::string> parse_pipeline_layout(const std::string& layout) {
  std::string text;
  for (char c : layout)
    if (c != ',') text += c;
  text = unroll(text, std::regex(R"(\(([^)]+)\)\*(\d+))"));
  text = unroll(text, std::regex(R"((.)\*(\d+))"));
  std::vector<std::string> stages(1);
  for (char c : text) {
    if (c == '|') {
      stages.emplace_back();
      continue;
    }
    if (c != 'E' && c != 'L' && c != 't' && c != 'm')
      throw std::invalid_argument(std::string(layout_flag) + " '" + layout + "': invalid layer character '" +
                                  std::string(1, c) + "' (known: E embedding, t transformer layer, m MTP layer, L loss, "
                                  "'|' between stages, '(...)*n' and 'x*n' to repeat)");
    stages.back() += c;
  }
  return stages;
}

pipeline_split split_pipeline_layers(const pipeline_split_settings& s) {
  check_settings(s);
  const auto counts = s.layout ? counts_from_layout(s) : counts_from_flags(s);
  const int pp = s.pipeline_size, vp = s.virtual_size;
  pipeline_split out;
  out.stages.assign(std::size_t(pp), std::vector<pipeline_stage_span>(std::size_t(vp)));
  // counts[i % pp][i / pp] is virtual stage i's, in Megatron's round-robin order; the placement
  // says where stage i runs.
  int next = 0;
  const int num_stages = pp * vp;
  auto span_of = [&](int stage) -> pipeline_stage_span& {
    const auto at = position_of_stage(s.placement, pp, stage);
    return out.stages[std::size_t(at.rank)][std::size_t(at.chunk)];
  };
  for (int i = 0; i < num_stages; ++i) {
    auto& span = span_of(i);
    span.layer_begin = next;
    span.layer_end = next += counts[std::size_t(i % pp)][std::size_t(i / pp)];
  }
  if (next != s.num_layers)
    throw std::invalid_argument("the pipeline stages hold " + str(next) + " layers but --num-layers is " + str(s.num_layers) +
                                "; make --decoder-first/last-pipeline-num-layers and the middle stages add up to it");
  span_of(0).embedding = true;
  span_of(num_stages - 1).loss = true;
  return out;
}

std::string describe_pipeline_split(const pipeline_split& split) {
  const std::size_t pp = split.stages.size(), vp = pp ? split.stages[0].size() : 0;
  std::vector<std::vector<std::string>> rows;
  if (vp > 1) {
    rows.push_back({""});
    for (std::size_t v = 0; v < vp; ++v) rows.back().push_back("VPP rank " + str(std::int64_t(v)));
  }
  auto row_text = [&](std::size_t r) {
    std::vector<std::string> cells;
    for (const auto& span : split.stages[r]) cells.push_back(stage_text(span));
    return cells;
  };
  for (std::size_t start = 0; start < pp;) {
    std::size_t end = start + 1;
    while (end < pp && row_text(end) == row_text(start)) ++end;
    auto cells = row_text(start);
    cells.insert(cells.begin(), end - start == 1 ? "PP rank " + str(std::int64_t(start))
                                                 : "PP rank " + str(std::int64_t(start)) + "-" + str(std::int64_t(end - 1)));
    rows.push_back(cells);
    start = end;
  }
  std::vector<std::size_t> widths(vp + 1, 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  const std::string gap(vp <= 4 ? 8 : 4, ' ');
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) line += gap;
      line += row[c] + std::string(widths[c] - row[c].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace mactor::config
