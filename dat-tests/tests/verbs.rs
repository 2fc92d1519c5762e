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

/// Why a case that counts the whole device's resources cannot run here (not alone on the
/// device, or no `rdma` tool), if it cannot.
fn cannot_count_resources() -> Option<dat_tests::Outcome> {
    if std::env::var_os("DAT_TEST_DEVICE_EXCLUSIVE").is_none() {
        return Some(dat_tests::Outcome::Skip(
            "counts the whole device's resources: run alone with DAT_TEST_DEVICE_EXCLUSIVE=1 \
             (dat-provider-verbs/tests/rxe-suite.sh does)"
                .into(),
        ));
    }
    if device_resources().is_none() {
        return Some(dat_tests::Outcome::Skip(
            "no `rdma` tool (iproute2) to count resources".into(),
        ));
    }
    None
}

/// Waits (up to 30 s: the kernel releases some objects after a short delay, and the emulated
/// guest can be slow) until the device's resources are `want` again.
fn resources_back_to(want: &std::collections::BTreeMap<String, u64>, when: &str) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
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

    if let Some(skip) = cannot_count_resources() {
        return skip;
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

/// A DTO EVD that was dequeued (the facade keeps the provider's poller of its CQ until the
/// EVD's last handle goes) and is then freed gives its CQ back to the device, as does one
/// freed without a dequeue and one the IA's close frees.
fn dequeued_evd_frees_its_cq(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    use dat::DatError;
    use dat::types::{CloseFlags, EvdFlags};

    if let Some(skip) = cannot_count_resources() {
        return skip;
    }
    // librdmacm keeps objects of its own for the life of the process once an IA has opened
    // (see `disconnect_storm`): count from after one open and close.
    {
        let (ia, other) = t.open_pair();
        ia.close(CloseFlags::Abrupt).unwrap();
        other.close(CloseFlags::Abrupt).unwrap();
    }
    let closed = device_resources().expect("rdma resource show");
    let (ia, other) = t.open_pair();
    let before = device_resources().expect("rdma resource show");
    let cqs = |r: &std::collections::BTreeMap<String, u64>| r.get("cq").copied().unwrap_or(0);
    let plain = ia.create_evd(64, EvdFlags::DTO, None).unwrap();
    let evds: Vec<dat::Evd> = (0..3)
        .map(|_| ia.create_evd(64, EvdFlags::DTO, None).unwrap())
        .collect();
    let made = device_resources().expect("rdma resource show");
    assert_eq!(cqs(&made), cqs(&before) + 4, "one CQ per DTO EVD: {made:?}");
    // Dequeued in turns, so that the cache fills, hits and misses.
    for _ in 0..40 {
        for e in &evds {
            assert_eq!(e.dequeue().err(), Some(DatError::QUEUE_EMPTY));
        }
    }
    plain.free().unwrap();
    evds[0].free().unwrap();
    evds[1].free().unwrap();
    let mut want = before.clone();
    want.insert("cq".to_owned(), cqs(&before) + 1);
    resources_back_to(&want, "after three EVDs were freed, two of them dequeued");
    // The last EVD, dequeued and still cached, goes with the IA.
    ia.close(CloseFlags::Abrupt).unwrap();
    other.close(CloseFlags::Abrupt).unwrap();
    resources_back_to(&closed, "after the IAs closed with a dequeued EVD");
    dat_tests::Outcome::Pass
}

#[test]
fn dequeued_evd_frees_its_cq_and_close_frees_the_rest() {
    dat_tests::run_case(
        &verbs_target(),
        module_path!(),
        "verbs",
        "dequeued_evd_frees_its_cq_and_close_frees_the_rest",
        dequeued_evd_frees_its_cq,
    );
}

/// Waits (bounded) on `ia`'s async EVD for `DAT_ASYNC_ERROR_IA_CATASTROPHIC`; the EP-broken
/// events of the IA's endpoints may come before it. Returns the EPs reported broken.
fn expect_catastrophic(ia: &dat::Ia, within: std::time::Duration) -> Vec<dat::types::EpId> {
    use dat::AsyncHandle;
    use dat::types::{EventNumber, Timeout};
    let evd = ia.async_evd();
    let end = std::time::Instant::now() + within;
    let mut broken = Vec::new();
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        let timeout = Timeout::from_duration(left.max(std::time::Duration::from_millis(1)));
        let ev = match evd.wait(timeout, 1) {
            Ok((ev, _)) => ev,
            Err(e) => panic!("no IA_CATASTROPHIC on {} within {within:?}: {e}", ia.name()),
        };
        match (ev.number, &ev.data) {
            (EventNumber::AsyncIaCatastrophic, dat::EventData::Async { handle, .. }) => {
                assert_eq!(*handle, AsyncHandle::Ia, "{ev:?}");
                return broken;
            }
            (EventNumber::AsyncEpBroken, dat::EventData::Async { handle, .. }) => {
                let AsyncHandle::Ep(ep) = handle else {
                    panic!("EP_BROKEN names no EP: {ev:?}");
                };
                broken.push(*ep);
            }
            _ => panic!("unexpected async event on {}: {ev:?}", ia.name()),
        }
    }
}

/// The verbs device is removed under open IAs (`rdma link delete`): every IA, connected or
/// idle, gets `DAT_ASYNC_ERROR_IA_CATASTROPHIC` within a bounded time; the connection ends
/// (BROKEN, outstanding receives flushed); later calls that need the device fail
/// with `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_DEVICE`, posts on the broken EP complete as
/// flushed, and the IAs close.
fn device_removal(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    use dat::types::{CloseFlags, DtoStatus, EvdFlags, EventNumber, MemPriv, PspFlags, Qos};
    use dat::{ConnectFlags, DatError, EpState, Subtype};
    use dat_tests::harness::{assert_empty, expect_dto, next_event, pair, post_recv, post_send};

    if std::env::var_os("DAT_TEST_DEVICE_EXCLUSIVE").is_none() {
        return dat_tests::Outcome::Skip(
            "removes the verbs device: run alone with DAT_TEST_DEVICE_EXCLUSIVE=1 \
             (dat-provider-verbs/tests/rxe-suite.sh does)"
                .into(),
        );
    }
    let dev = std::env::var("RXE_DEV").unwrap_or_else(|_| "rxe0".to_owned());
    let shown = std::process::Command::new("rdma")
        .args(["link", "show", &format!("{dev}/1")])
        .output();
    if !shown.is_ok_and(|o| o.status.success()) {
        return dat_tests::Outcome::Skip(format!("no `rdma` tool (iproute2) or no device {dev}"));
    }
    let p = pair(t);
    let (idle, idle2) = t.open_pair();
    post_recv(&p.b, &p.b.ep, 0, 64, 7);

    // The kernel finishes a removal only once every process has closed the device, and
    // librdmacm closes its context of the last device only at exit (see the verbs README):
    // the removal runs aside and ends after this process; rxe-suite.sh puts the device back.
    let deleter = std::process::Command::new("rdma")
        .args(["link", "delete", &dev])
        .spawn()
        .expect("rdma link delete");
    let within = std::time::Duration::from_secs(60);
    let a_broken = expect_catastrophic(&p.a.ia, within);
    let b_broken = expect_catastrophic(&p.b.ia, within);
    expect_catastrophic(&idle, within);
    expect_catastrophic(&idle2, within);

    // The connection ends on both sides, the receive flushed. Both ends are on the one device:
    // rdma_cm removes one end's id first, which disconnects the other, so that one may see
    // DISCONNECTED before its own removal; the first always sees BROKEN.
    let ends: Vec<EventNumber> = [(&p.a.conn, &p.a.ep), (&p.b.conn, &p.b.ep)]
        .into_iter()
        .map(|(evd, ep)| {
            let ev = next_event(evd);
            assert!(
                matches!(ev.number, EventNumber::Broken | EventNumber::Disconnected),
                "{ev:?}"
            );
            assert!(
                matches!(ev.data, dat::EventData::Connection { ep: id, .. } if id == ep.id()),
                "{ev:?}"
            );
            ev.number
        })
        .collect();
    assert!(ends.contains(&EventNumber::Broken), "no BROKEN: {ends:?}");
    assert_empty(&p.a.conn);
    assert_empty(&p.b.conn);
    assert_eq!(p.a.ep.state(), Ok(EpState::Disconnected));
    assert_eq!(p.b.ep.state(), Ok(EpState::Disconnected));
    let c = expect_dto(&p.b.recv);
    assert_eq!((c.status, c.cookie.0), (DtoStatus::Flushed, 7), "{c:?}");
    assert!(
        a_broken.iter().all(|&e| e == p.a.ep.id()) && b_broken.iter().all(|&e| e == p.b.ep.id()),
        "EP_BROKEN for other EPs: {a_broken:?} {b_broken:?}"
    );

    // A post on the broken EP completes as flushed.
    post_send(&p.a, &p.a.ep, 0, 64, 9);
    let c = expect_dto(&p.a.req);
    assert_eq!((c.status, c.cookie.0), (DtoStatus::Flushed, 9), "{c:?}");

    // Whatever needs the device fails with a clear code, on every IA.
    let gone = DatError::resources(Subtype::ResourceDevice);
    for ia in [&p.a.ia, &idle] {
        assert_eq!(
            ia.create_pz().err(),
            Some(gone),
            "create_pz on {}",
            ia.name()
        );
        assert_eq!(
            ia.create_evd(8, EvdFlags::DTO, None).err(),
            Some(gone),
            "DTO EVD on {}",
            ia.name()
        );
    }
    assert_eq!(p.a.pz.alloc(4096, MemPriv::ALL).err(), Some(gone), "LMR");
    assert_eq!(
        p.a.ia
            .create_psp(t.qual(), &p.a.cr, PspFlags::Consumer)
            .err(),
        Some(gone),
        "PSP"
    );
    let fresh = p.a.another_ep();
    assert_eq!(
        fresh
            .connect(
                p.b.addr(),
                p.qual,
                dat::types::Timeout::from_duration(std::time::Duration::from_secs(5)),
                b"",
                Qos::BestEffort,
                ConnectFlags::Default,
            )
            .err(),
        Some(gone),
        "connect"
    );

    for ia in [&p.a.ia, &p.b.ia, &idle, &idle2] {
        ia.close(CloseFlags::Abrupt)
            .expect("IA close after the device is gone");
    }
    drop(fresh);
    drop(p);
    // Not waited for (see above); dropping it leaves it running.
    drop(deleter);
    dat_tests::Outcome::Pass
}

#[test]
fn device_removal_is_catastrophic_and_calls_fail_cleanly() {
    dat_tests::run_case(
        &verbs_target(),
        module_path!(),
        "verbs",
        "device_removal_is_catastrophic_and_calls_fail_cleanly",
        device_removal,
    );
}

// Requests posted with SUPPRESS go unsignalled on the QP (every 8th in a row signalled): the
// provider retires them when a later request's work completion arrives.

use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber};
use dat_tests::harness::{
    assert_empty, deep_pair, expect_completion, expect_conn, pair, pattern, post_recv, read,
};

/// The verbs target with qualifiers of its own (61000 and up): these cases run in parallel
/// with the suite's, whose target counts from its own base.
fn unsig_target() -> &'static RegistryTarget {
    static T: std::sync::OnceLock<RegistryTarget> = std::sync::OnceLock::new();
    T.get_or_init(|| verbs_target().with_qual_base(61_000))
}

/// Runs `case` on [`unsig_target`].
fn run_unsig(name: &str, case: fn(&dyn dat_tests::Target) -> dat_tests::Outcome) {
    dat_tests::run_case(unsig_target(), module_path!(), "verbs", name, case);
}

/// Rounds of `depth - 1` suppressed RDMA writes and one signalled write: once the signalled
/// one has completed, the consumer has nothing outstanding, so the next round's `depth`
/// posts all fit (no `INSUFFICIENT_RESOURCES` from requests not yet retired), every byte
/// lands, and only the signalled writes report.
fn suppressed_writes_keep_the_request_queue_exact(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    const DEPTH: u32 = 4;
    const ROUNDS: u32 = 40;
    let p = deep_pair(t, DEPTH);
    let data = pattern(usize::try_from(DEPTH * ROUNDS * 8).unwrap(), 9);
    p.a.lmr.write(0, &data).unwrap();
    for r in 0..ROUNDS {
        for i in 0..DEPTH {
            let n = u64::from(r * DEPTH + i);
            let last = i == DEPTH - 1;
            let flags = if last {
                CompletionFlags::DEFAULT
            } else {
                CompletionFlags::SUPPRESS
            };
            let res = p.a.ep.post_rdma_write(
                &[p.a.lmr.triplet(n * 8, 8)],
                Cookie(n),
                p.b.lmr.rmr_triplet(n * 8, 8),
                flags,
            );
            assert_eq!(res, Ok(()), "post {n} (round {r})");
            if last {
                expect_completion(
                    &p.a.req,
                    &p.a.ep,
                    n,
                    DtoStatus::Success,
                    DtoOp::RdmaWrite,
                    8,
                );
            }
        }
    }
    assert_empty(&p.a.req);
    assert_eq!(read(&p.b.lmr, 0, data.len()), data);
    dat_tests::harness::disconnect_pair(&p);
    assert_empty(&p.a.req);
    dat_tests::Outcome::Pass
}

#[test]
fn suppressed_writes_keep_the_request_queue_exact_on_verbs() {
    run_unsig(
        "suppressed_writes_keep_the_request_queue_exact_on_verbs",
        suppressed_writes_keep_the_request_queue_exact,
    );
}

/// A suppressed RDMA write that fails (a wrong key) behind suppressed writes that succeed:
/// its error reaches the consumer with its cookie, the writes before it report nothing (they
/// succeeded), the ones after it are flushed in posting order, and the connection breaks.
fn a_failing_suppressed_write_reports_its_error(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    let p = pair(t);
    p.a.lmr.write(0, &pattern(64, 3)).unwrap();
    let post = |cookie: u64, flags: CompletionFlags, bad: bool| {
        let mut remote = p.b.lmr.rmr_triplet(cookie * 8, 8);
        if bad {
            remote.rmr_context ^= 0x5A5A_5A5A;
        }
        p.a.ep
            .post_rdma_write(
                &[p.a.lmr.triplet(cookie * 8, 8)],
                Cookie(cookie),
                remote,
                flags,
            )
            .expect("post_rdma_write");
    };
    for c in 1..=3 {
        post(c, CompletionFlags::SUPPRESS, false);
    }
    post(4, CompletionFlags::SUPPRESS, true);
    post(5, CompletionFlags::SUPPRESS, false);
    post(6, CompletionFlags::DEFAULT, false);
    let c = expect_completion(
        &p.a.req,
        &p.a.ep,
        4,
        DtoStatus::RemoteAccess,
        DtoOp::RdmaWrite,
        0,
    );
    assert_eq!(c.transferred_length, 0);
    expect_completion(
        &p.a.req,
        &p.a.ep,
        5,
        DtoStatus::Flushed,
        DtoOp::RdmaWrite,
        0,
    );
    expect_completion(
        &p.a.req,
        &p.a.ep,
        6,
        DtoStatus::Flushed,
        DtoOp::RdmaWrite,
        0,
    );
    expect_conn(&p.a.conn, EventNumber::Broken, &p.a.ep);
    assert_eq!(
        read(&p.b.lmr, 8, 24),
        read(&p.a.lmr, 8, 24),
        "the writes before the failure landed"
    );
    assert_empty(&p.a.req);
    dat_tests::Outcome::Pass
}

#[test]
fn a_failing_suppressed_write_reports_its_error_on_verbs() {
    run_unsig(
        "a_failing_suppressed_write_reports_its_error_on_verbs",
        a_failing_suppressed_write_reports_its_error,
    );
}

/// A graceful disconnect right after suppressed sends (an unsignalled tail, no completion of
/// its own to come): the sends are delivered and retired as successes (no FLUSHED completion
/// reaches the consumer, as one would if the disconnect gave up waiting for them).
fn graceful_disconnect_after_a_suppressed_tail(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    let p = pair(t);
    p.a.lmr.write(0, &pattern(64, 5)).unwrap();
    for c in 0..3 {
        post_recv(&p.b, &p.b.ep, 1024 + c * 8, 8, c);
    }
    for c in 0..3 {
        p.a.ep
            .post_send(
                &[p.a.lmr.triplet(c * 8, 8)],
                Cookie(c),
                CompletionFlags::SUPPRESS,
            )
            .expect("post_send");
    }
    p.a.ep.disconnect(CloseFlags::Graceful).expect("disconnect");
    expect_conn(&p.a.conn, EventNumber::Disconnected, &p.a.ep);
    for c in 0..3 {
        expect_completion(&p.b.recv, &p.b.ep, c, DtoStatus::Success, DtoOp::Receive, 8);
    }
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    assert_empty(&p.a.req);
    assert_eq!(read(&p.b.lmr, 1024, 24), read(&p.a.lmr, 0, 24));
    dat_tests::Outcome::Pass
}

#[test]
fn graceful_disconnect_after_a_suppressed_tail_on_verbs() {
    run_unsig(
        "graceful_disconnect_after_a_suppressed_tail_on_verbs",
        graceful_disconnect_after_a_suppressed_tail,
    );
}

/// Suppressed RDMA reads (more than a run of unsignalled requests) then a signalled one: reads
/// stay signalled, so only the last reports, and when it does every read's bytes are there.
fn suppressed_reads_land_before_the_last_completes(
    t: &dyn dat_tests::Target,
) -> dat_tests::Outcome {
    const N: u64 = 20;
    let p = pair(t);
    let data = pattern(usize::try_from(N * 16).unwrap(), 7);
    p.b.lmr.write(0, &data).unwrap();
    for c in 0..N {
        let flags = if c == N - 1 {
            CompletionFlags::DEFAULT
        } else {
            CompletionFlags::SUPPRESS
        };
        p.a.ep
            .post_rdma_read(
                &[p.a.lmr.triplet(4096 + c * 16, 16)],
                Cookie(c),
                p.b.lmr.rmr_triplet(c * 16, 16),
                flags,
            )
            .expect("post_rdma_read");
    }
    expect_completion(
        &p.a.req,
        &p.a.ep,
        N - 1,
        DtoStatus::Success,
        DtoOp::RdmaRead,
        16,
    );
    assert_eq!(read(&p.a.lmr, 4096, data.len()), data);
    assert_empty(&p.a.req);
    dat_tests::Outcome::Pass
}

#[test]
fn suppressed_reads_land_before_the_last_completes_on_verbs() {
    run_unsig(
        "suppressed_reads_land_before_the_last_completes_on_verbs",
        suppressed_reads_land_before_the_last_completes,
    );
}

/// The sleeps (voluntary context switches) of this process's verbs event threads
/// (`dat-verbs-<ia>`), from `/proc/self/task/*/status`.
fn event_thread_sleeps() -> u64 {
    let mut n = 0;
    for task in std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("dat-verbs-") {
            continue;
        }
        // A thread that exited meanwhile no longer counts.
        n += dat_tests::harness::voluntary_switches(&task.path().join("status")).unwrap_or(0);
    }
    n
}

/// A consumer that keeps a window of RDMA writes outstanding and takes their completions one
/// at a time, working for a moment before each take, mostly finds its completion queued
/// already. Those takes count as polls of the IA's CQs, whether a dequeue or a wait makes
/// them: the event thread leaves the CQs to the consumer and sleeps. Before, only a look at
/// a CQ counted: once the event thread had drained a batch into the queue, the consumer
/// looked idle, the event thread armed the CQs and was woken for every completion from then
/// on, and delivered it itself (about 880 wake-ups a second in `datperf`'s 64 KiB bandwidth
/// run, each preempting the consumer on a shared CPU; here about one per completion).
fn queued_takes_keep_the_event_thread_asleep(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    use std::time::{Duration, Instant};

    use dat::types::{CompletionFlags, Cookie, DtoStatus, Timeout};
    use dat::{DatError, Event, EventData};

    const WINDOW: u64 = 8;
    const MESSAGES: u64 = 300;
    if std::env::var_os("DAT_TEST_DEVICE_EXCLUSIVE").is_none() {
        return dat_tests::Outcome::Skip(
            "counts the sleeps of every verbs event thread of the process: run alone with \
             DAT_TEST_DEVICE_EXCLUSIVE=1 (dat-provider-verbs/tests/rxe-suite.sh does)"
                .into(),
        );
    }
    for how in ["dequeue", "wait"] {
        // A pair of its own (new event threads, which arm the CQs once the consumer has been
        // idle for 2 ms; an older one looks at it only every second or so by then).
        let p = dat_tests::harness::deep_pair(t, 2 * WINDOW as u32);
        let write = |i: u64| {
            p.a.ep
                .post_rdma_write(
                    &[p.a.lmr.triplet(0, 64)],
                    Cookie(i),
                    p.b.lmr.rmr_triplet(0, 64),
                    CompletionFlags::DEFAULT,
                )
                .expect("post_rdma_write");
        };
        let take = || -> Event {
            if how == "wait" {
                return p.a.req.wait(Timeout(10_000_000), 1).expect("wait").0;
            }
            let give_up = Instant::now() + Duration::from_secs(10);
            loop {
                match p.a.req.dequeue() {
                    Ok(ev) => return ev,
                    Err(e) if e == DatError::QUEUE_EMPTY => {
                        assert!(Instant::now() < give_up, "no completion within 10 s");
                    }
                    Err(e) => panic!("dequeue: {e}"),
                }
            }
        };
        // Idle first, so that the event thread has armed the CQs.
        std::thread::sleep(Duration::from_millis(50));
        let before = event_thread_sleeps();
        let start = Instant::now();
        let mut next = 0;
        while next < WINDOW {
            write(next);
            next += 1;
        }
        // Nobody polls for a while: the event thread, woken by the first completion, queues
        // the window's completions, and the consumer starts out finding them queued.
        std::thread::sleep(Duration::from_millis(20));
        for i in 0..MESSAGES {
            // The consumer's own work between two takes (no DAT call).
            let until = Instant::now() + Duration::from_millis(1);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            let EventData::Dto(c) = take().data else {
                panic!("{how}: completion {i}: not a DTO event");
            };
            assert_eq!(
                (c.cookie, c.status),
                (Cookie(i), DtoStatus::Success),
                "{how}"
            );
            if next < MESSAGES {
                write(next);
                next += 1;
            }
        }
        let took = start.elapsed();
        let woke = event_thread_sleeps() - before;
        // Left alone, an event thread looks at the polling consumer after 2, 4, 8 ... ms (one
        // wake-up each, about ten in this run); woken per completion it would be MESSAGES.
        assert!(
            woke <= MESSAGES / 10,
            "{how}: the event threads woke {woke} times in {took:?} while the consumer took \
             {MESSAGES} completions (at most {})",
            MESSAGES / 10
        );
    }
    dat_tests::Outcome::Pass
}

#[test]
fn queued_takes_keep_the_verbs_event_thread_asleep() {
    dat_tests::run_case(
        &verbs_target(),
        module_path!(),
        "verbs",
        "queued_takes_keep_the_verbs_event_thread_asleep",
        queued_takes_keep_the_event_thread_asleep,
    );
}

/// A zero-based LMR on verbs must start on a page boundary (the kernel registers an MR only
/// where its I/O address, 0 here, and its memory share their offset in a page): a region that
/// does not is refused with `DAT_INVALID_PARAMETER|DAT_INVALID_ARG3` (not a resource error),
/// and the same region registers as an ordinary LMR.
fn zero_based_lmr_needs_a_page_aligned_region(t: &dyn dat_tests::Target) -> dat_tests::Outcome {
    use std::sync::Arc;

    use dat::types::{MemPriv, VaType};
    let (ia, _) = t.open_pair();
    let pz = ia.create_pz().unwrap();
    let page = Arc::new(dat::Buffer::alloc(8192, 4096).unwrap());
    // A buffer aligned to 64 bytes but not to a page: of 64 allocations of a little over
    // 4 KiB, all kept until one is found, one that does not start on a page boundary.
    let bufs: Vec<_> = (0..64)
        .map(|_| Arc::new(dat::Buffer::alloc(4096 + 64, 64).unwrap()))
        .collect();
    let unaligned = bufs
        .iter()
        .find(|b| !b.addr().is_multiple_of(4096))
        .cloned()
        .expect("a buffer that does not start on a page boundary");
    assert_eq!(
        pz.register(unaligned.clone(), MemPriv::ALL, VaType::ZeroBased)
            .map(|_| ()),
        Err(dat::DatError::invalid_arg(3))
    );
    let va = pz.register(unaligned, MemPriv::ALL, VaType::Va).unwrap();
    let zb = pz.register(page, MemPriv::ALL, VaType::ZeroBased).unwrap();
    assert_eq!((zb.address(), zb.len()), (0, 8192));
    va.free().unwrap();
    zb.free().unwrap();
    dat_tests::Outcome::Pass
}

#[test]
fn zero_based_lmr_needs_a_page_aligned_region_on_verbs() {
    dat_tests::run_case(
        &verbs_target(),
        module_path!(),
        "verbs",
        "zero_based_lmr_needs_a_page_aligned_region_on_verbs",
        zero_based_lmr_needs_a_page_aligned_region,
    );
}
