// The inspector's web page: one self-contained HTML document (no external scripts or styles, the
// job's machines may have no internet) that polls /api/snapshot and draws the live view.
#pragma once

#include <string_view>

namespace mactor::inspector {

/// The page served at GET /. It reads the token from its own `?token=` and sends it as a Bearer
/// header. Chart colours (what tests look for): F #4c78a8, B #f58518, opt #54a24b,
/// dp-sync #b279a2, transfers (RF/SF/RB/SB) #72b7b2, anything else #9d9d9d.
std::string_view web_page();

}  // namespace mactor::inspector
