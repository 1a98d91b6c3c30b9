#include "registry.hpp"

#include <algorithm>

namespace attn {

const char* param_name(Param p) {
  switch (p) {
    case Param::chunk: return "chunk";
  }
  return "?";
}

bool Form::takes(Param p) const { return std::find(params.begin(), params.end(), p) != params.end(); }

const std::vector<Form>& forms() {
  static const std::vector<Form> all = [] {
    std::vector<Form> list;
    for (auto family : {softmax_forms, linear_forms}) {
      auto more = family();
      list.insert(list.end(), more.begin(), more.end());
    }
    return list;
  }();
  return all;
}

const Form* find_form(std::string_view name) {
  for (const auto& f : forms())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace attn
