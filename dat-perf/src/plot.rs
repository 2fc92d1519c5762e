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

const FONT: &str = "sans-serif";

/// Distinct colours that read well on white (the "tab20" set: ten strong, then their light
/// companions), so a full `compare` run (about 20 series) never gives two series one colour.
const COLORS: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(255, 152, 150),
    RGBColor(197, 176, 213),
    RGBColor(196, 156, 148),
    RGBColor(247, 182, 210),
    RGBColor(199, 199, 199),
    RGBColor(219, 219, 141),
    RGBColor(158, 218, 229),
];

/// A size on the log axis, whose ticks are powers of ten: `1`, `100`, `10k`, `1M`.
fn axis_size(x: f64) -> String {
    let x = x.round().max(0.0) as u64;
    if x >= 1_000_000 && x.is_multiple_of(1_000_000) {
        format!("{}M", x / 1_000_000)
    } else if x >= 1000 && x.is_multiple_of(1000) {
        format!("{}k", x / 1000)
    } else {
        x.to_string()
    }
}

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
    // One colour per series and operation, the same in both panels.
    let mut labels: Vec<String> = Vec::new();
    for r in records {
        let l = r.label();
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let (left, right) = root.split_horizontally(800);
    for (area, metric) in [(left, Metric::Latency), (right, Metric::Bandwidth)] {
        panel(&area, records, metric, &labels)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    records: &[Record],
    metric: Metric,
    all_labels: &[String],
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
        .x_label_formatter(&|x| axis_size(*x))
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
    for label in &labels {
        let i = all_labels.iter().position(|l| l == label).unwrap_or(0);
        let color = COLORS[i % COLORS.len()].to_rgba();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Op;

    #[test]
    fn axis_labels_and_a_png() {
        assert_eq!(axis_size(1.0), "1");
        assert_eq!(axis_size(100.0), "100");
        assert_eq!(axis_size(10_000.0), "10k");
        assert_eq!(axis_size(1e6), "1M");
        let dir = std::env::temp_dir().join(format!("datperf-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.png");
        let r = |metric, size, value| {
            Record::new(
                "x",
                "baseline",
                Op::PingPong,
                metric,
                size,
                1,
                value,
                "poll",
            )
        };
        let rs = [
            r(Metric::Latency, 1, 2.0),
            r(Metric::Latency, 4096, 5.0),
            r(Metric::Bandwidth, 4096, 100.0),
        ];
        plot(&rs, &path, "test").unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // No figures at all: both panels say so, and the file is still written.
        plot(&[], &path, "empty").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
