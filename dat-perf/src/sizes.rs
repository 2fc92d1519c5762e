//! Message sizes: parsing `--sizes`, printing them, and how many iterations each size gets.

/// The largest size datperf measures by default (4 MiB).
pub const MAX_SIZE: u64 = 4 << 20;

/// Parses one size: a number with an optional binary suffix `K`, `M` or `G` (`4K` = 4096).
///
/// # Errors
/// A message naming the text when it is not a size or is zero.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1u64 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1u64 << 30),
        _ => (t, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 64, 4K, 1M)"))?;
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if v == 0 {
        return Err(format!("`{text}`: sizes start at 1 byte"));
    }
    Ok(v)
}

/// Parses a size list: comma-separated sizes and ranges. `A..B` is every power of two from
/// `A` to `B`; `A..B*F` multiplies by `F` each step (`1..4M*4` = 1, 4, 16, ... 4M).
///
/// # Errors
/// A message naming the bad element; an empty list; a range whose factor is below 2.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, rest)) = part.split_once("..") {
            let (b, f) = match rest.split_once('*') {
                Some((b, f)) => (
                    b,
                    f.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("`{part}`: bad factor"))?,
                ),
                None => (rest, 2),
            };
            if f < 2 {
                return Err(format!("`{part}`: the factor must be at least 2"));
            }
            let (lo, hi) = (parse_size(a)?, parse_size(b)?);
            if lo > hi {
                return Err(format!("`{part}`: the range is empty"));
            }
            let mut s = lo;
            while s <= hi {
                out.push(s);
                match s.checked_mul(f) {
                    Some(n) => s = n,
                    None => break,
                }
            }
        } else {
            out.push(parse_size(part)?);
        }
    }
    if out.is_empty() {
        return Err("no sizes given".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A size for people: `1`, `64`, `4K`, `1M`, `1536`.
pub fn format_size(size: u64) -> String {
    if size >= 1 << 30 && size.is_multiple_of(1 << 30) {
        format!("{}G", size >> 30)
    } else if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{}M", size >> 20)
    } else if size >= 1 << 10 && size.is_multiple_of(1 << 10) {
        format!("{}K", size >> 10)
    } else {
        size.to_string()
    }
}

/// Ping-pong iterations for `size`: `base` up to 64 KiB, then scaled down by size (at least
/// 10), so large sizes take about as long as small ones.
pub fn lat_iters(size: u64, base: u64) -> u64 {
    const KNEE: u64 = 64 << 10;
    if size <= KNEE {
        base.max(1)
    } else {
        (base.saturating_mul(KNEE) / size).max(10)
    }
}

/// Streaming operations for `size`: `bytes` in total, at least 16 and at most 200 000 messages.
pub fn bw_count(size: u64, bytes: u64) -> u64 {
    (bytes / size.max(1)).clamp(16, 200_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_lists_ranges_and_suffixes() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size(" 1m "), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("17"), Ok(17));
        assert!(parse_size("0").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert_eq!(parse_sizes("64,1,4K,64"), Ok(vec![1, 64, 4096]));
        assert_eq!(parse_sizes("1..8"), Ok(vec![1, 2, 4, 8]));
        assert_eq!(
            parse_sizes("1..4M*4").map(|v| v.len()),
            Ok(12),
            "1, 4, 16, ... 4M"
        );
        assert_eq!(parse_sizes("3..20*3"), Ok(vec![3, 9]));
        assert!(parse_sizes("8..1").is_err());
        assert!(parse_sizes("1..8*1").is_err());
        assert!(parse_sizes(",").is_err());
    }

    #[test]
    fn sizes_format_and_schedule() {
        assert_eq!(format_size(1), "1");
        assert_eq!(format_size(1536), "1536");
        assert_eq!(format_size(4096), "4K");
        assert_eq!(format_size(4 << 20), "4M");
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(lat_iters(64, 1000), 1000);
        assert_eq!(lat_iters(1 << 20, 1000), 62);
        assert_eq!(lat_iters(4 << 20, 100), 10);
        assert_eq!(lat_iters(1, 0), 1);
        assert_eq!(bw_count(1 << 20, 256 << 20), 256);
        assert_eq!(bw_count(4 << 20, 1 << 20), 16);
        assert_eq!(bw_count(1, 1 << 30), 200_000);
    }
}
