//! `datperf info`: the IAs of the resolved configuration, their providers and attributes
//! (like `fi_info`).

use std::fmt::Write as _;

use dat::Registry;

/// Describes every IA the configuration names: where it is defined, its provider, and for
/// those that open here the IA and provider attributes; the others say why not.
pub fn describe(reg: &Registry) -> String {
    let cfg = reg.config();
    let mut out = String::new();
    let compiled = reg.provider_names();
    let _ = writeln!(out, "configuration: {}", cfg.source);
    let _ = writeln!(
        out,
        "default IA: {}",
        cfg.default.as_deref().unwrap_or("(none)")
    );
    let _ = writeln!(
        out,
        "providers compiled in: {}",
        if compiled.is_empty() {
            "none".to_owned()
        } else {
            compiled.join(", ")
        }
    );
    for line in &cfg.skipped {
        let _ = writeln!(out, "skipped config line: {line:?}");
    }
    for entry in &cfg.ias {
        out.push('\n');
        let _ = writeln!(out, "ia: {}", entry.name);
        let _ = writeln!(out, "    provider: {}", entry.provider);
        let origin = match entry.line {
            Some(l) => format!("{}:{l}", entry.source),
            None => entry.source.to_string(),
        };
        let _ = writeln!(out, "    defined at: {origin}");
        if !entry.params.is_empty() {
            let _ = writeln!(out, "    params: {}", entry.params.to_string().trim_end());
        }
        if !compiled.contains(&entry.provider.as_str()) {
            let _ = writeln!(
                out,
                "    status: provider {} not compiled in",
                entry.provider
            );
            continue;
        }
        match reg.open_ia(Some(&entry.name), 8) {
            Err(e) => {
                let _ = writeln!(out, "    status: does not open: {e}");
            }
            Ok(ia) => {
                let a = ia.attr();
                let p = ia.provider_attr();
                let _ = writeln!(out, "    status: opens");
                let rows: Vec<(&str, String)> = vec![
                    ("adapter", a.adapter_name.clone()),
                    ("vendor", a.vendor_name.clone()),
                    ("address", a.ia_address.to_string()),
                    (
                        "provider version",
                        format!("{}.{}", p.provider_version.0, p.provider_version.1),
                    ),
                    (
                        "dapl version",
                        format!("{}.{}", p.dapl_version.0, p.dapl_version.1),
                    ),
                    ("thread safe", p.is_thread_safe.to_string()),
                    ("max message size", a.max_message_size.to_string()),
                    ("max rdma size", a.max_rdma_size.to_string()),
                    ("max private data", p.max_private_data_size.to_string()),
                    ("max eps", a.max_eps.to_string()),
                    ("max dto per ep", a.max_dto_per_ep.to_string()),
                    ("max evd qlen", a.max_evd_qlen.to_string()),
                    ("max iov per dto", a.max_iov_segments_per_dto.to_string()),
                    ("max rdma read out", a.max_rdma_read_out.to_string()),
                    ("rdma read", p.rdma_read_supported.to_string()),
                    ("srq", p.srq_supported.to_string()),
                    ("optimal alignment", p.optimal_buffer_alignment.to_string()),
                ];
                for (k, v) in rows {
                    let _ = writeln!(out, "    {k}: {v}");
                }
                for na in a.transport_attr.iter().chain(&a.vendor_attr) {
                    let _ = writeln!(out, "    {}: {}", na.name, na.value);
                }
                for na in &p.provider_specific_attr {
                    let _ = writeln!(out, "    {}: {}", na.name, na.value);
                }
                let _ = ia.close(dat::types::CloseFlags::Abrupt);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_open_and_missing_providers() {
        let reg = crate::testutil::registry();
        let text = describe(&reg);
        assert!(text.contains("default IA: a\n"), "{text}");
        assert!(text.contains("providers compiled in: mem\n"), "{text}");
        assert!(text.contains("ia: a\n    provider: mem\n"), "{text}");
        assert!(text.contains("    address: 10.0.0.1:"), "{text}");
        assert!(text.contains("ia: tcp-lo\n    provider: tcp\n"), "{text}");
        assert!(
            text.contains("    status: provider tcp not compiled in\n"),
            "{text}"
        );
        assert_eq!(text.matches("status: opens").count(), 2, "{text}");
    }
}
