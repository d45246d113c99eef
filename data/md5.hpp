// MD5 (RFC 1321), only to name index cache files the way Megatron does (hashlib.md5 hexdigest).
#pragma once
#include <string>
#include <string_view>

namespace mactor::data {

/// Lower-case hex MD5 digest of `bytes`.
std::string md5_hex(std::string_view bytes);

}  // namespace mactor::data
