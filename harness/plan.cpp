#include "plan.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "axes.hpp"

namespace attn {

std::vector<Point> plan_points(const Sweep& sweep, const std::string& backend) {
  const std::vector<SweptAxis>& axes = swept_axes();
  std::vector<Point> points;
  std::set<PointKey> seen;
  for (const auto& precision : sweep.precisions)
    for (const Form* form : sweep.forms) {
      if (!form->supports(precision)) continue;
      // The index of each axis's value, counted up like an odometer: the last axis fastest.
      std::vector<std::size_t> at(axes.size(), 0);
      for (bool more = true; more;) {
        Shape shape{};
        FormParams params = sweep.params;
        for (std::size_t i = 0; i < axes.size(); ++i) {
          const bool taken = !axes[i].param || form->takes(*axes[i].param);
          axes[i].set(shape, params, taken ? int(axes[i].values(sweep).values[at[i]]) : 0);
        }
        if (sweep.dv_follows_dk) shape.dv = shape.dk;
        ResultRow planned = point_row(*form, shape, params, backend, precision);
        const KernelPath path = kernel_path_of(*form, backend, precision, shape, params);
        planned.kernel = path.name;
        planned.kernel_reason = path.reason;
        if (seen.insert(key_of(planned)).second)
          points.push_back({form, precision, shape, params, std::move(planned)});
        more = false;
        for (std::size_t i = axes.size(); i-- > 0 && !more;) {
          more = ++at[i] < axes[i].values(sweep).values.size();
          if (!more) at[i] = 0;
        }
      }
    }
  // The points of one shape run together, L ascending (a series' shorter L
  // first, as SeriesLimits needs), and in one shape each form's slot counts,
  // precisions and chunk sizes in a row: the inputs they share are drawn once
  // (PointCache keeps them from point to point), where at 128K tokens drawing
  // them takes longer than timing the kernel.
  auto form_index = [&](const Form* form) {
    return std::find(sweep.forms.begin(), sweep.forms.end(), form) - sweep.forms.begin();
  };
  auto order = [&](const Point& p) {
    return std::tuple(p.shape.seq, p.shape.batch, p.shape.heads, p.shape.dk, p.shape.dv,
                      form_index(p.form), p.params.axis("slots"));
  };
  std::stable_sort(points.begin(), points.end(),
                   [&](const Point& a, const Point& b) { return order(a) < order(b); });
  return points;
}

std::vector<std::string> unsupported_pairs(const Sweep& sweep) {
  std::vector<std::string> lines;
  for (const auto& precision : sweep.precisions)
    for (const Form* form : sweep.forms)
      if (!form->supports(precision))
        lines.push_back(fmt::format("{}: no {} kernel, skipped", form->name, precision));
  return lines;
}

bool is_final(const ResultRow& row) {
  return row.status == "ok" || row.status == "oom" || row.status == "timeout";
}

// --- SeriesLimits --------------------------------------------------------------

void SeriesLimits::note(const ResultRow& row) {
  if (row.status == "ok") {
    auto [it, inserted] = largest_ok_.try_emplace(series_of(row), row);
    if (!inserted && row.axis("seq") > it->second.axis("seq")) it->second = row;
  }
  if (row.status != "timeout" && row.status != "oom") return;
  auto [it, inserted] = lowest_failed_.try_emplace(series_of(row), row);
  if (!inserted && row.axis("seq") < it->second.axis("seq")) it->second = row;
}

std::optional<ResultRow> SeriesLimits::skip(const ResultRow& planned) const {
  ResultRow row = planned;
  const auto failed = lowest_failed_.find(series_of(planned));
  if (failed != lowest_failed_.end() && planned.axis("seq") > failed->second.axis("seq")) {
    row.status = failed->second.status;
    row.note = row.status == "timeout" ? "skipped: a shorter L timed out"
                                       : "skipped: a shorter L ran out of memory";
    return row;
  }
  const auto ok = largest_ok_.find(series_of(planned));
  if (options_.point_timeout_s <= 0 || ok == largest_ok_.end() ||
      planned.axis("seq") <= ok->second.axis("seq") || !(ok->second.flops > 0) ||
      !(ok->second.time_median_s > 0))
    return std::nullopt;
  const double per_call_s = ok->second.time_median_s * planned.flops / ok->second.flops;
  const double calls = options_.calls_per_point(per_call_s);
  if (calls * per_call_s <= options_.point_timeout_s) return std::nullopt;
  row.status = "timeout";
  row.note = fmt::format(
      "skipped: {:g} calls predicted to take {:.3g} s (L={} took {:.3g} s a call; scaled by "
      "flops), "
      "past --point-timeout {:g} s",
      calls, calls * per_call_s, ok->second.axis("seq"), ok->second.time_median_s,
      options_.point_timeout_s);
  return row;
}

PointKey SeriesLimits::series_of(const ResultRow& row) { return key_of(row).without("seq"); }

// --- EtaModel ------------------------------------------------------------------

EtaModel::EtaModel(const MeasureOptions& options, const std::vector<ResultRow>& rows)
    : options_(options) {
  for (const auto& row : rows)
    if (row.status == "ok") add(row, 0);
}

void EtaModel::add(const ResultRow& measured, double wall_s) {
  const double kernel_s = options_.calls_per_point(measured.time_median_s) * measured.time_median_s;
  const double fixed_s = wall_s > kernel_s ? wall_s - kernel_s : 0;
  Form& form = by_form_[{measured.form, measured.precision}];
  if (measured.flops > 0) form.seconds_per_flop = measured.time_median_s / measured.flops;
  form.fixed.add(fixed_s);
  wall_.add(wall_s);
}

double EtaModel::estimate(const ResultRow& planned) const {
  if (!knows(planned)) return wall_.mean();
  const auto& form = by_form_.at({planned.form, planned.precision});
  const double call_s = form.seconds_per_flop * planned.flops;
  return options_.calls_per_point(call_s) * call_s + form.fixed.mean();
}

bool EtaModel::knows(const ResultRow& planned) const {
  const auto it = by_form_.find({planned.form, planned.precision});
  return it != by_form_.end() && it->second.seconds_per_flop > 0;
}

double EtaModel::Mean::mean() const { return n > 0 ? sum / n : std::nan(""); }

}  // namespace attn
