#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "error_check.hpp"
#include "plan.hpp"
#include "sweep_points.hpp"
#include "text.hpp"

namespace attn {

void print_point_list(const Sweep& sweep) {
  for (const Point& p : plan_points(sweep, enabled_backend(sweep.backend))) {
    std::vector<std::string> options, axes;
    for (const OptionSpec& option : p.form->options)
      options.push_back(fmt::format("{}: {}", json_string(option.name),
                                    json_string(option_text(p.params.options.get(option.name)))));
    for (const auto& [name, value] : p.planned.axes)
      axes.push_back(fmt::format("{}: {}", json_string(name), value));
    const ErrorCheck check = point_error_check(*p.form, p.shape, p.params, sweep.measure);
    fmt::print(
        "{{\"form\": {}, \"family\": {}, \"precision\": {}, \"backend\": {}, \"variant\": {}, "
        "\"options\": {{{}}}, \"axes\": {{{}}}, \"err_heads\": {}, "
        "\"err_rows\": {}}}\n",
        json_string(p.planned.form), json_string(p.planned.family), json_string(p.precision),
        json_string(p.planned.backend), json_string(p.planned.variant), fmt::join(options, ", "),
        fmt::join(axes, ", "), check.heads.size(), check.rows_per_head(p.shape.seq));
  }
}

}  // namespace attn
