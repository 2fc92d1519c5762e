//! The conformance suite on a verbs IA: `rxe0` (Soft-RoCE in `../shared/rxe-vm`, registry
//! `dat-provider-verbs/tests/rxe.toml`), or the IA named by `$DAT_TEST_VERBS_IA`.
//!
//! Every case is skipped with the reason (`SKIPPED [...]` on stderr) when the `verbs` feature
//! is off or the IA is not configured; with the IA configured but no device, every case fails
//! at IA open naming the cause. `dat-provider-verbs/tests/rxe-suite.sh` builds this on the host
//! and runs it in the VM.

use dat_tests::RegistryTarget;

fn verbs_target() -> RegistryTarget {
    let ia = std::env::var("DAT_TEST_VERBS_IA").unwrap_or_else(|_| "rxe0".to_owned());
    // TEST-NET-2: the VM has no route there, so rdma_cm fails address resolution at once.
    RegistryTarget::new(&ia).with_unreachable("198.51.100.1:0".parse().unwrap())
}

dat_tests::conformance_suite!(verbs, verbs_target());

/// The device's resource counts (`rdma resource show`, iproute2: PDs, CQs, QPs, CM ids, MRs,
/// SRQs, summed over devices); `None` without the tool.
fn device_resources() -> Option<std::collections::BTreeMap<String, u64>> {
    let out = std::process::Command::new("rdma")
        .args(["resource", "show"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut counts = std::collections::BTreeMap::new();
    // One line per device: "0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 0 srq 0".
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let words: Vec<&str> = line.split_whitespace().skip(2).collect();
        for kv in words.chunks(2) {
            if let [k, v] = kv
                && let Ok(n) = v.parse::<u64>()
            {
                *counts.entry((*k).to_owned()).or_insert(0) += n;
            }
        }
    }
    Some(counts)
}

/// Waits (up to 10 s: the kernel releases some objects after a short delay) until the device's
/// resources are `want` again.
fn resources_back_to(want: &std::collections::BTreeMap<String, u64>, when: &str) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now = device_resources().expect("rdma resource show");
        if &now == want {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "{when}: device resources {now:?}, expected {want:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A storm of connections, each carrying a message, disconnected (both graceful and abrupt)
/// and freed, leaves the device's PDs, CQs, QPs, CM ids and MRs where they were; closing the
/// IAs returns everything.
fn disconnect_storm(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    use dat::types::{CloseFlags, EventNumber};
    use dat_tests::harness::{connect_more, expect_conn, post_recv, post_send, sides};

    if std::env::var_os("DAT_TEST_DEVICE_EXCLUSIVE").is_none() {
        return dat_tests::Outcome::Skip(
            "counts the whole device's resources: run alone with DAT_TEST_DEVICE_EXCLUSIVE=1 \
             (dat-provider-verbs/tests/rxe-suite.sh does)"
                .into(),
        );
    }
    if device_resources().is_none() {
        return dat_tests::Outcome::Skip("no `rdma` tool (iproute2) to count resources".into());
    }
    // librdmacm opens the device, and allocates a PD of its own on it once a CM id binds to
    // it, for the life of the process: count from after one connection.
    {
        let p = dat_tests::harness::pair(t);
        p.a.ia.close(CloseFlags::Abrupt).unwrap();
        p.b.ia.close(CloseFlags::Abrupt).unwrap();
    }
    let before = device_resources().expect("rdma resource show");
    {
        let (a, b) = sides(t);
        let psp = b.psp(t);
        let steady = device_resources().expect("rdma resource show");
        for i in 0..60u64 {
            let (ea, eb) = connect_more(&a, &b, &psp);
            post_recv(&b, &eb, 0, 64, i);
            post_send(&a, &ea, 0, 64, i);
            dat_tests::harness::expect_dto(&a.req);
            dat_tests::harness::expect_dto(&b.recv);
            let flags = if i % 2 == 0 {
                CloseFlags::Graceful
            } else {
                CloseFlags::Abrupt
            };
            ea.disconnect(flags).unwrap();
            expect_conn(&a.conn, EventNumber::Disconnected, &ea);
            expect_conn(&b.conn, EventNumber::Disconnected, &eb);
            ea.free().unwrap();
            eb.free().unwrap();
        }
        resources_back_to(&steady, "after 60 connections freed");
        psp.free().unwrap();
        a.ia.close(CloseFlags::Abrupt).unwrap();
        b.ia.close(CloseFlags::Abrupt).unwrap();
    }
    resources_back_to(&before, "after both IAs closed");
    dat_tests::Outcome::Pass
}

#[test]
fn no_device_resources_left_after_a_disconnect_storm() {
    dat_tests::run_case(
        &verbs_target(),
        module_path!(),
        "verbs",
        "no_device_resources_left_after_a_disconnect_storm",
        disconnect_storm,
    );
}
