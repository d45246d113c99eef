// The inspector's secret: a random token every request must carry, and the private file it is
// written to so that only the job's user can attach.
#pragma once

#include <string>
#include <string_view>

namespace mactor::inspector {

/// 256 random bits from /dev/urandom as 64 lowercase hex digits. Throws std::runtime_error if
/// /dev/urandom cannot be read.
std::string make_access_token();

/// Writes token (and a newline) to path with mode 0600. A new file is created 0600; an existing
/// one is reused only if it is a regular file owned by this user that no one else can read or
/// write (else std::runtime_error naming the file and the fix). Symbolic links are refused.
void write_token_file(const std::string& path, std::string_view token);

/// The token in a file written by write_token_file (surrounding whitespace dropped). Throws
/// std::runtime_error naming the file when it cannot be read or is empty.
std::string read_token_file(const std::string& path);

/// The token file a job writes unless MACTOR_INSPECT_TOKEN_FILE names one:
/// HOME/.mactor/inspector/<job id>.token.
std::string default_token_path(const std::string& home, const std::string& job_id);

/// Removes a job's default token files, its own and its in-job restarts' (<job id>-rN.token),
/// which a job whose rank 0 was killed could not remove; the launcher calls it once the job is
/// over. Returns how many it removed.
int remove_job_token_files(const std::string& home, const std::string& job_id);

/// Compares in time independent of where the strings first differ.
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace mactor::inspector
