//! `--plot FILE.png`: latency and bandwidth against size, log-log, one line per series and
//! operation. Text uses DejaVu Sans compiled in from the `dejavu` crate, so no system fonts
//! are needed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::{PerfError, PerfResult};
use crate::record::{Metric, Record};
use crate::sizes::format_size;

const FONT: &str = "sans-serif";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_err()
        {
            tracing::warn!("the embedded font did not load; the plot will have no text");
        }
    });
}

fn plot_err(e: impl std::fmt::Display) -> PerfError {
    PerfError::io("draw the plot", std::io::Error::other(e.to_string()))
}

/// Draws latency (left) and bandwidth (right) against message size into a PNG at `path`.
/// A panel without figures says so.
///
/// # Errors
/// [`PerfError::Io`] when the file cannot be written or drawing fails.
pub fn plot(records: &[Record], path: &Path, title: &str) -> PerfResult<()> {
    register_font();
    let root = BitMapBackend::new(path, (1600, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let root = root.titled(title, (FONT, 24)).map_err(plot_err)?;
    let (left, right) = root.split_horizontally(800);
    for (area, metric) in [(left, Metric::Latency), (right, Metric::Bandwidth)] {
        panel(&area, records, metric)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    records: &[Record],
    metric: Metric,
) -> PerfResult<()> {
    let rs: Vec<&Record> = records
        .iter()
        .filter(|r| r.metric == metric && r.value.is_finite() && r.value > 0.0)
        .collect();
    let name = match metric {
        Metric::Latency => "latency, half round trip",
        _ => "bandwidth",
    };
    if rs.is_empty() {
        area.draw(&Text::new(
            format!("{name}: no figures"),
            (40, 60),
            (FONT, 20),
        ))
        .map_err(plot_err)?;
        return Ok(());
    }
    let xmin = rs.iter().map(|r| r.size).min().unwrap_or(1) as f64;
    let xmax = rs.iter().map(|r| r.size).max().unwrap_or(2) as f64;
    let ymin = rs.iter().map(|r| r.value).fold(f64::INFINITY, f64::min);
    let ymax = rs.iter().map(|r| r.value).fold(0.0, f64::max);
    let (xlo, xhi) = (xmin / 1.5, xmax * 1.5);
    let (ylo, yhi) = (ymin / 2.0, ymax * 4.0);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{name} ({})", metric.unit()), (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc(metric.unit())
        .x_label_formatter(&|x| format_size(x.round().max(1.0) as u64))
        .y_label_formatter(&|y| crate::record::format_value(*y))
        .label_style((FONT, 14))
        .draw()
        .map_err(plot_err)?;
    let mut labels: Vec<String> = Vec::new();
    for r in &rs {
        let l = r.label();
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    for (i, label) in labels.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = rs
            .iter()
            .filter(|r| &r.label() == label)
            .map(|r| (r.size, r.value))
            .collect::<BTreeMap<u64, f64>>()
            .into_iter()
            .map(|(s, v)| (s as f64, v))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(plot_err)?;
    Ok(())
}
