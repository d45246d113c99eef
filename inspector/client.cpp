// The inspector client on cpp-httplib; maps transport failures and HTTP statuses to client_error.
#include "inspector/client.hpp"

#include <cmath>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace mactor::inspector {
namespace {

using json = nlohmann::json;

httplib::Client connect(const std::string& host, int port, const std::string& token, double timeout_s) {
  httplib::Client http(host, port);
  auto sec = static_cast<time_t>(timeout_s);
  auto usec = static_cast<time_t>(std::lround((timeout_s - static_cast<double>(sec)) * 1e6));
  http.set_connection_timeout(sec, usec);
  http.set_read_timeout(sec, usec);
  http.set_write_timeout(sec, usec);
  http.set_bearer_token_auth(token);
  return http;
}

std::string describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "connection refused or no route to it";
    case httplib::Error::ConnectionTimeout: return "connection timed out";
    case httplib::Error::Read: return "no answer";
    default: return httplib::to_string(error);
  }
}

[[noreturn]] void unreachable(const std::string& address, httplib::Error error) {
  throw client_error(client_error::reason::unreachable,
                     "cannot reach the inspector at " + address + " (" + describe(error) +
                         "); check the address the job printed at start and that the job is still running");
}

[[noreturn]] void forbidden(const std::string& address) {
  throw client_error(client_error::reason::forbidden,
                     "the inspector at " + address + " refused the token (HTTP 403); pass the token "
                     "the job printed at start with --token, or its token file with --token-file");
}

// The "error" or "message" field of a JSON answer, else the raw body.
std::string answer_text(const std::string& body) {
  try {
    json j = json::parse(body);
    if (j.contains("message") && j["message"].is_string()) return j["message"];
    if (j.contains("error") && j["error"].is_string()) return j["error"];
  } catch (const json::exception&) {
  }
  return body;
}

}  // namespace

client::client(std::string address, std::string token, double timeout_s)
    : address_(std::move(address)), token_(std::move(token)), timeout_s_(timeout_s) {
  std::string rest = address_;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  auto colon = rest.rfind(':');
  std::string port_text = colon == std::string::npos ? "" : rest.substr(colon + 1);
  bool digits = !port_text.empty() && port_text.size() <= 5 &&
                port_text.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stoi(port_text) > 65535 || std::stoi(port_text) == 0)
    throw std::invalid_argument("inspector address '" + address_ +
                                "' is not HOST:PORT; use the address the job printed at start, "
                                "e.g. 127.0.0.1:40123");
  host_ = rest.substr(0, colon);
  if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']') host_ = host_.substr(1, host_.size() - 2);
  port_ = std::stoi(port_text);
}

job_snapshot client::snapshot() const {
  auto http = connect(host_, port_, token_, timeout_s_);
  auto res = http.Get("/api/snapshot");
  if (!res) unreachable(address_, res.error());
  if (res->status == 403) forbidden(address_);
  if (res->status != 200)
    throw client_error(client_error::reason::bad_answer,
                       "the inspector at " + address_ + " answered HTTP " + std::to_string(res->status) +
                           ": " + answer_text(res->body));
  try {
    return snapshot_from_json_text(res->body);
  } catch (const std::exception& e) {
    throw client_error(client_error::reason::bad_answer,
                       "the inspector at " + address_ + " sent a snapshot this mactor cannot read (" +
                           e.what() + "); is the job running the same mactor version?");
  }
}

swap_result client::swap(const std::string& target, const std::vector<std::string>& flags) const {
  auto http = connect(host_, port_, token_, timeout_s_);
  auto res = http.Post("/api/swap/" + target, json{{"flags", flags}}.dump(), "application/json");
  if (!res) unreachable(address_, res.error());
  if (res->status == 403) forbidden(address_);
  if (res->status == 404)
    throw client_error(client_error::reason::bad_answer,
                       "the inspector at " + address_ + " has no swap endpoint for '" + target + "'");
  std::string message = answer_text(res->body);
  bool ok = false;
  try {
    json j = json::parse(res->body);
    ok = j.value("ok", false);
  } catch (const json::exception&) {
  }
  return {ok && res->status == 200, message};
}

}  // namespace mactor::inspector
