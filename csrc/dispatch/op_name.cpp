// See op_name.h.
#include "dispatch/op_name.h"

namespace torch_fl {

namespace {
constexpr const char kAten[] = "aten::";
constexpr size_t kAtenLength = sizeof(kAten) - 1;
} // namespace

std::string short_op_name(const c10::OperatorName& name) {
  std::string s = name.name;
  if (s.rfind(kAten, 0) == 0) s.erase(0, kAtenLength);
  if (!name.overload_name.empty()) s += "." + name.overload_name;
  return s;
}

c10::OperatorName parse_short_op_name(const std::string& short_name) {
  const auto dot = short_name.find('.');
  if (dot == std::string::npos) return c10::OperatorName(kAten + short_name, "");
  return c10::OperatorName(kAten + short_name.substr(0, dot), short_name.substr(dot + 1));
}

std::string override_variable(const std::string& short_name) {
  std::string var = "FLAGOS_OP_";
  var.reserve(var.size() + short_name.size() + 2);
  for (char c : short_name) {
    if (c == '.') {
      var += "__";
    } else {
      var += c;
    }
  }
  return var;
}

} // namespace torch_fl
