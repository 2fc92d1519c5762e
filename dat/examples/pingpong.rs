//! Send/recv ping-pong latency and RDMA-write bandwidth on one IA, server and client in one
//! process. Usage: `cargo run --release -p dat --example pingpong [IA-NAME]` (default: the
//! registry's default IA). Set `DAT_LOG=debug` for diagnostics.

#![allow(clippy::print_stdout)] // a command-line program: its output is the point

use std::thread;
use std::time::{Duration, Instant};

use dat::types::{
    CloseFlags, CompletionFlags, Cookie, EvdFlags, EventNumber, MemPriv, PspFlags, Qos, Timeout,
};
use dat::{ConnectFlags, Ep, EpParams, Evd, EventData, Ia, Lmr, Registry};

const WAIT: Timeout = Timeout(10_000_000);
const MAX: usize = 1 << 20;

struct Side {
    ep: Ep,
    conn: Evd,
    dto: Evd,
    lmr: Lmr,
}

fn side(ia: &Ia) -> Result<Side, dat::DatError> {
    let pz = ia.create_pz()?;
    let conn = ia.create_evd(8, EvdFlags::CONNECTION, None)?;
    let dto = ia.create_evd(256, EvdFlags::DTO, None)?;
    let ep = ia.create_ep(&EpParams {
        pz: Some(&pz),
        recv_evd: Some(&dto),
        request_evd: Some(&dto),
        connect_evd: Some(&conn),
        ..EpParams::default()
    })?;
    let lmr = pz.alloc(MAX, MemPriv::ALL)?;
    Ok(Side { ep, conn, dto, lmr })
}

fn expect(evd: &Evd, n: EventNumber) -> Result<EventData, Box<dyn std::error::Error>> {
    let (ev, _) = evd.wait(WAIT, 1)?;
    if ev.number != n {
        return Err(format!("expected {n:?}, got {ev:?}").into());
    }
    Ok(ev.data)
}

fn dto_ok(evd: &Evd) -> Result<u32, Box<dyn std::error::Error>> {
    match expect(evd, EventNumber::DtoCompletion)? {
        EventData::Dto(c) if c.status == dat::types::DtoStatus::Success => Ok(c.transferred_length),
        other => Err(format!("completion failed: {other:?}").into()),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("DAT_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    let name = std::env::args().nth(1);
    let reg = Registry::from_env()?;
    let server_ia = reg.open_ia(name.as_deref(), 8)?;
    let client_ia = reg.open_ia(Some(server_ia.name()), 8)?;
    let sizes = [8usize, 64, 512, 4096, 65536];
    let iters = 2000;

    let s = side(&server_ia)?;
    let c = side(&client_ia)?;
    let cr_evd = server_ia.create_evd(4, EvdFlags::CR, None)?;
    let psp = server_ia.create_psp_any(&cr_evd, PspFlags::Consumer)?;
    let addr = server_ia.attr().ia_address;
    // What the server would advertise to its peer for one-sided writes.
    let server_buf = s.lmr.rmr_triplet(0, MAX as u32);

    let server = thread::spawn(move || -> Result<(), String> {
        let run = || -> Result<(), Box<dyn std::error::Error>> {
            s.ep.post_recv(
                &[s.lmr.triplet(0, MAX as u32)],
                Cookie(0),
                CompletionFlags::DEFAULT,
            )?;
            let EventData::ConnectionRequest { cr, .. } =
                expect(&cr_evd, EventNumber::ConnectionRequest)?
            else {
                return Err("no request".into());
            };
            server_ia
                .cr(cr)
                .ok_or("request vanished")?
                .accept(Some(&s.ep), &[])?;
            expect(&s.conn, EventNumber::Established)?;
            // Echo every message back with the same length until a zero-length one arrives.
            loop {
                let len = dto_ok(&s.dto)?;
                if len == 0 {
                    break;
                }
                s.ep.post_recv(
                    &[s.lmr.triplet(0, MAX as u32)],
                    Cookie(0),
                    CompletionFlags::DEFAULT,
                )?;
                s.ep.post_send(
                    &[s.lmr.triplet(0, len)],
                    Cookie(1),
                    CompletionFlags::SUPPRESS,
                )?;
            }
            expect(&s.conn, EventNumber::Disconnected)?;
            Ok(())
        };
        run().map_err(|e| e.to_string())
    });

    c.ep.connect(
        addr,
        psp.conn_qual(),
        WAIT,
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )?;
    expect(&c.conn, EventNumber::Established)?;
    println!(
        "IA `{}` ({} provider)",
        client_ia.name(),
        client_ia.provider_attr().provider_name
    );
    println!("{:>10} {:>14}", "bytes", "half-RTT (us)");
    for &size in &sizes {
        let start = Instant::now();
        for _ in 0..iters {
            c.ep.post_recv(
                &[c.lmr.triplet(0, MAX as u32)],
                Cookie(2),
                CompletionFlags::DEFAULT,
            )?;
            c.ep.post_send(
                &[c.lmr.triplet(0, size as u32)],
                Cookie(3),
                CompletionFlags::SUPPRESS,
            )?;
            dto_ok(&c.dto)?;
        }
        let half = start.elapsed().as_secs_f64() * 1e6 / f64::from(iters) / 2.0;
        println!("{size:>10} {half:>14.2}");
    }

    // RDMA write streaming into the server's buffer (one-sided: the server does nothing).
    let remote = |size: usize| dat::types::RmrTriplet {
        segment_length: size as u32,
        ..server_buf
    };
    println!("{:>10} {:>14}", "bytes", "RDMA write MB/s");
    for &size in &[4096usize, 65536, MAX] {
        let n = (256 * MAX / size).min(20_000) as u32;
        let start = Instant::now();
        for i in 0..n {
            let flags = if i + 1 == n {
                CompletionFlags::DEFAULT
            } else {
                CompletionFlags::SUPPRESS
            };
            c.ep.post_rdma_write(
                &[c.lmr.triplet(0, size as u32)],
                Cookie(4),
                remote(size),
                flags,
            )?;
        }
        dto_ok(&c.dto)?;
        let mbps = f64::from(n) * size as f64 / start.elapsed().as_secs_f64() / 1e6;
        println!("{size:>10} {mbps:>14.0}");
    }

    c.ep.post_send(&[], Cookie(5), CompletionFlags::DEFAULT)?;
    dto_ok(&c.dto)?;
    c.ep.disconnect(CloseFlags::Graceful)?;
    expect(&c.conn, EventNumber::Disconnected)?;
    server.join().map_err(|_| "server thread panicked")??;
    thread::sleep(Duration::from_millis(1));
    Ok(())
}
