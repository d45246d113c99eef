// Host lists, hostfiles and rank mapping with Open MPI's rules and error wording.
#include "tools/launcher/host_map.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

namespace mactor::tools {
namespace {

void add_host(std::vector<host_entry>& hosts, const std::string& name, int slots) {
  for (auto& h : hosts) {
    if (h.name == name) {
      h.slots += slots;
      return;
    }
  }
  hosts.push_back({name, slots});
}

int parse_slots(const std::string& where, const std::string& v) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 1 || x > 1 << 20)
    throw usage_error(where + ": slot count '" + v + "' is not a whole number >= 1; e.g. node1:4");
  return static_cast<int>(x);
}

// Ranks per host for `n` ranks: npernode each, or slots first and the rest round-robin.
std::vector<int> counts_per_host(const launch_options& o, const std::vector<host_entry>& hosts,
                                 int n) {
  std::vector<int> count(hosts.size(), 0);
  int left = n;
  for (size_t h = 0; h < hosts.size() && left > 0; ++h) {
    int cap = o.npernode > 0 ? o.npernode : hosts[h].slots;
    count[h] = std::min(cap, left);
    left -= count[h];
  }
  for (size_t h = 0; left > 0; h = (h + 1) % hosts.size(), --left) ++count[h];
  return count;
}

void check_fits(const launch_options& o, const std::vector<host_entry>& hosts, int n) {
  int slots = 0;
  for (auto& h : hosts) slots += h.slots;
  if (o.npernode > 0) {
    int most = o.npernode * static_cast<int>(hosts.size());
    if (n > most)
      throw usage_error(std::to_string(n) + " ranks do not fit " + std::to_string(o.npernode) +
                        " per node on " + std::to_string(hosts.size()) +
                        " host(s); lower -n, raise -N, or add hosts");
    if (!o.oversubscribe)
      for (auto& h : hosts)
        if (o.npernode > h.slots)
          throw usage_error("-N " + std::to_string(o.npernode) + " asks for more ranks than host " +
                            h.name + " has slots (" + std::to_string(h.slots) +
                            "); add --oversubscribe or give it more slots (" + h.name + ":" +
                            std::to_string(o.npernode) + ")");
  } else if (n > slots && !o.oversubscribe) {
    throw usage_error("there are not enough slots available: " + std::to_string(n) +
                      " ranks requested, " + std::to_string(slots) +
                      " slots on the hosts; request fewer ranks, give hosts more slots "
                      "(-H host:N, slots=N), or add --oversubscribe");
  }
}

}  // namespace

std::vector<host_entry> parse_host_list(const std::string& list) {
  std::vector<host_entry> hosts;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw usage_error("-H " + list + " has an empty host name; write -H a:2,b:2");
    auto colon = item.rfind(':');
    if (colon == std::string::npos) add_host(hosts, item, 1);
    else add_host(hosts, item.substr(0, colon), parse_slots("-H " + list, item.substr(colon + 1)));
  }
  return hosts;
}

std::vector<host_entry> parse_hostfile(const std::string& path, int default_slots) {
  std::ifstream in(path);
  if (!in) throw usage_error("--hostfile " + path + " cannot be read; check the path");
  std::vector<host_entry> hosts;
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name, word;
    if (!(words >> name)) continue;
    int slots = default_slots;
    std::string where = path + ":" + std::to_string(lineno);
    while (words >> word) {
      if (word.rfind("slots=", 0) == 0) slots = parse_slots(where, word.substr(6));
      else if (word.rfind("max_slots=", 0) == 0 || word.rfind("max-slots=", 0) == 0) continue;
      else throw usage_error(where + ": '" + word + "' is not understood; write 'host slots=N'");
    }
    add_host(hosts, name, slots);
  }
  if (hosts.empty()) throw usage_error("--hostfile " + path + " lists no hosts");
  return hosts;
}

std::string describe_map(const job_layout& L) {
  std::string out;
  for (auto& p : L.ranks)
    out += "rank " + std::to_string(p.rank) + " on " + L.hosts[p.host].name + " (local rank " +
           std::to_string(p.local_rank) + " of " + std::to_string(L.local_size[p.host]) +
           ", node " + std::to_string(L.node_rank[p.host]) + ", app " + std::to_string(p.context) +
           ")\n";
  return out;
}

job_layout map_ranks(launch_options& o, int cores) {
  job_layout L;
  if (!o.hostfile.empty() && !o.host_lists.empty())
    throw usage_error("give either -H or --hostfile, not both");
  if (!o.hostfile.empty()) L.hosts = parse_hostfile(o.hostfile, 1);
  for (auto& list : o.host_lists)
    for (auto& h : parse_host_list(list)) add_host(L.hosts, h.name, h.slots);
  if (L.hosts.empty()) L.hosts.push_back({"localhost", cores});

  int slots = 0;
  for (auto& h : L.hosts) slots += o.npernode > 0 ? o.npernode : h.slots;
  int given = 0, unsized = 0;
  for (auto& c : o.contexts) (c.np > 0 ? given += c.np : ++unsized);
  if (unsized > 1) throw usage_error("only one program may leave out -n; give each one -n N");
  for (auto& c : o.contexts) {
    if (c.np > 0) continue;
    c.np = slots - given;
    if (c.np < 1)
      throw usage_error("no slots are left for '" + c.argv[0] + "'; give it -n N (and " +
                        "--oversubscribe if needed)");
  }
  int n = std::accumulate(o.contexts.begin(), o.contexts.end(), 0,
                      [](int s, const app_context& c) { return s + c.np; });
  check_fits(o, L.hosts, n);

  std::vector<int> host_of(n);
  if (o.map_by_node && o.npernode == 0) {
    // Round-robin over hosts, skipping full ones while any host still has a free slot.
    std::vector<int> used(L.hosts.size(), 0);
    size_t h = 0;
    for (int r = 0; r < n; ++r) {
      bool any_free = false;
      for (size_t k = 0; k < L.hosts.size(); ++k) any_free |= used[k] < L.hosts[k].slots;
      while (any_free && used[h] >= L.hosts[h].slots) h = (h + 1) % L.hosts.size();
      host_of[r] = static_cast<int>(h);
      ++used[h];
      h = (h + 1) % L.hosts.size();
    }
  } else {
    auto count = counts_per_host(o, L.hosts, n);
    int r = 0;
    for (size_t h = 0; h < L.hosts.size(); ++h)
      for (int k = 0; k < count[h]; ++k) host_of[r++] = static_cast<int>(h);
  }

  L.local_size.assign(L.hosts.size(), 0);
  L.node_rank.assign(L.hosts.size(), -1);
  int ctx = 0, ctx_end = o.contexts[0].np;
  for (int r = 0; r < n; ++r) {
    while (r >= ctx_end) ctx_end += o.contexts[++ctx].np;
    int h = host_of[r];
    L.ranks.push_back({r, ctx, h, L.local_size[h]++});
  }
  int node = 0;
  for (size_t h = 0; h < L.hosts.size(); ++h)
    if (L.local_size[h] > 0) L.node_rank[h] = node++;
  return L;
}

}  // namespace mactor::tools
