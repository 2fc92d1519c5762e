//! The server end of a session: announce the IA and buffer, accept the data connection, then
//! run the server's part of each chunk the client asks for.

use std::time::Duration;

use dat::EventData;
use dat::types::{CompletionFlags, Cookie, DtoOp, EventNumber, PspFlags};

use crate::error::{DatContext, PerfError, PerfResult};
use crate::proto::{Channel, Test, ToClient, ToServer, WireRmr};
use crate::side::{Side, seq_byte};

/// Private data of the data connection's request and accept.
pub const HELLO_PDATA: &[u8] = b"datperf";

/// Serves one client on `ch` with `side` until the client quits or the session fails.
/// `idle` bounds the wait for the client's next command.
///
/// # Errors
/// [`PerfError::Dat`] with the code of the DAT call that failed (`DAT_INVALID_STATE` for a
/// connection broken by the peer, ...); [`PerfError::Timeout`] when the client goes silent;
/// [`PerfError::Protocol`] for control messages that make no sense.
pub fn serve_session(side: &Side, ch: &mut Channel, idle: Duration) -> PerfResult<()> {
    let psp = side
        .ia
        .create_psp_any(&side.cr, PspFlags::Consumer)
        .ctx("create PSP")?;
    let len = u32::try_from(side.lmr.len()).unwrap_or(u32::MAX);
    ch.send(&ToClient::Hello {
        ia: side.ia.name().to_owned(),
        provider: side.ia.provider_attr().provider_name.clone(),
        address: side.ia.attr().ia_address.to_string(),
        conn_qual: psp.conn_qual().0,
        rmr: WireRmr::from(side.lmr.rmr_triplet(0, len)),
    })?;
    accept(side, &side.ep, &side.conn, HELLO_PDATA, HELLO_PDATA, true)?;
    tracing::debug!(ia = side.ia.name(), "data connection established");
    let result = command_loop(side, ch, idle);
    let _ = psp.free();
    result
}

fn command_loop(side: &Side, ch: &mut Channel, idle: Duration) -> PerfResult<()> {
    loop {
        let cmd = match ch.recv::<ToServer>(idle) {
            Ok(c) => c,
            Err(PerfError::PeerClosed) => return Ok(()),
            Err(e) => return Err(e),
        };
        let result = match cmd {
            ToServer::Quit => {
                let _ = side.conn_event(&side.conn, EventNumber::Disconnected);
                return Ok(());
            }
            ToServer::Run {
                test,
                size,
                count,
                window,
                reply_to,
            } => run_chunk(side, ch, test, size, count, window, reply_to),
            ToServer::Conn {
                count,
                private_data,
            } => accept_many(side, ch, count, private_data),
        };
        ch.send(&ToClient::Done {
            error: result.as_ref().err().map(ToString::to_string),
        })?;
        result?;
    }
}

/// Waits for a connection request whose private data is `expect`, accepts it on `ep` with
/// `reply`, and (with `established`) waits for ESTABLISHED on `conn`.
fn accept(
    side: &Side,
    ep: &dat::Ep,
    conn: &dat::Evd,
    expect: &[u8],
    reply: &[u8],
    established: bool,
) -> PerfResult<()> {
    let ev = side.next_event(&side.cr)?;
    let EventData::ConnectionRequest { cr, .. } = ev.data else {
        return Err(PerfError::Protocol(format!(
            "expected a connection request, got {ev:?}"
        )));
    };
    let cr = side
        .ia
        .cr(cr)
        .ok_or_else(|| PerfError::Protocol("the connection request vanished".into()))?;
    let param = cr.query().ctx("query the connection request")?;
    if &*param.private_data != expect {
        let _ = cr.reject(&[]);
        return Err(PerfError::Protocol(format!(
            "connection request with private data {:?}, expected {} bytes",
            param.private_data,
            expect.len()
        )));
    }
    cr.accept(Some(ep), reply).ctx("accept")?;
    if established {
        side.conn_event(conn, EventNumber::Established)?;
    }
    Ok(())
}

/// The private data of connection-rate test connection `i`: `len` bytes derived from `i`.
pub fn conn_pdata(i: u64, len: u32) -> Vec<u8> {
    (0..u64::from(len))
        .map(|j| (i.wrapping_mul(31).wrapping_add(j) % 251) as u8)
        .collect()
}

fn accept_many(side: &Side, ch: &mut Channel, count: u64, pdata: u32) -> PerfResult<()> {
    let max = side.ia.provider_attr().max_private_data_size;
    if pdata > max {
        return Err(PerfError::Unsupported(format!(
            "{pdata} bytes of private data: IA `{}` carries at most {max}",
            side.ia.name()
        )));
    }
    ch.send(&ToClient::Ready)?;
    for i in 0..count {
        let data = conn_pdata(i, pdata);
        let reply: Vec<u8> = data.iter().rev().copied().collect();
        let ep = side.conn_ep()?;
        accept(side, &ep, &side.conn2, &data, &reply, false)?;
        // The client disconnects as soon as it is established; this side may learn of the
        // disconnect before its own ESTABLISHED (then it reports an accept completion error
        // and ESTABLISHED never comes). Either way this connection is over.
        loop {
            let ev = side.next_event(&side.conn2)?;
            match ev.number {
                EventNumber::Established => {}
                EventNumber::Disconnected => break,
                EventNumber::AcceptCompletionError => {
                    tracing::debug!("connection {i}: disconnected before established here");
                    break;
                }
                _ => {
                    return Err(PerfError::Protocol(format!(
                        "expected the client to disconnect, got {ev:?}"
                    )));
                }
            }
        }
        ep.free().ctx("free the connection-test EP")?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_chunk(
    side: &Side,
    ch: &mut Channel,
    test: Test,
    size: u64,
    count: u64,
    window: u32,
    reply_to: Option<WireRmr>,
) -> PerfResult<()> {
    if size == 0 || size > side.max_size() {
        return Err(PerfError::Unsupported(format!(
            "size {size} outside 1..={} (the server's buffer)",
            side.max_size()
        )));
    }
    let size32 = u32::try_from(size)
        .map_err(|_| PerfError::Unsupported(format!("size {size} above 4 GiB")))?;
    // Receives posted ahead. The ping-pong keeps two: the receive for message i+1 must be
    // posted before the echo of message i leaves (the client sends i+1 as soon as that echo
    // lands), and this end posts each replacement only after its echo, off the critical path.
    let (data_recvs, win) = match test {
        Test::LatSend => (count, 2),
        Test::BwSend => (count, u64::from(window.clamp(1, side.max_window(false)?))),
        Test::LatWrite | Test::BwWrite | Test::BwRead => (0, 1),
    };
    // Data receives plus the fence (a zero-length send after the data).
    let total = data_recvs + 1;
    let mut posted = 0u64;
    let post_recv = |posted: &mut u64| -> PerfResult<()> {
        side.ep
            .post_recv(
                &[side.lmr.triplet(0, size32)],
                Cookie(0),
                CompletionFlags::DEFAULT,
            )
            .ctx("post a receive")?;
        *posted += 1;
        Ok(())
    };
    while posted < total.min(win) {
        post_recv(&mut posted)?;
    }
    let last = (size - 1) as usize;
    if test == Test::LatWrite {
        side.lmr.write(last, &[0]).ctx("clear the buffer")?;
    }
    ch.send(&ToClient::Ready)?;
    if test == Test::LatWrite {
        let dst = reply_to.ok_or_else(|| {
            PerfError::Protocol("RDMA-write ping-pong without a reply buffer".into())
        })?;
        for i in 0..count {
            side.poll_byte(last, seq_byte(i))?;
            side.ep
                .post_rdma_write(
                    &[side.lmr.triplet(0, size32)],
                    Cookie(1),
                    dst.triplet(size32),
                    CompletionFlags::SUPPRESS,
                )
                .ctx("post an RDMA write")?;
        }
    }
    loop {
        // One-sided tests raise no event here before the fence: their whole chunk may
        // take longer than one event's timeout.
        let c = if data_recvs == 0 && test != Test::LatWrite {
            side.final_completion()?
        } else {
            side.completion()?
        };
        if c.operation != DtoOp::Receive {
            continue;
        }
        if c.transferred_length == 0 {
            side.ep
                .post_send(&[], Cookie(2), CompletionFlags::SUPPRESS)
                .ctx("post the fence reply")?;
            return Ok(());
        }
        if test == Test::LatSend {
            // The receive of the next message (data or the fence) is already posted.
            side.debug_assert_recvs_posted("before the echo");
            side.ep
                .post_send(
                    &[side.lmr.triplet(0, c.transferred_length)],
                    Cookie(3),
                    CompletionFlags::SUPPRESS,
                )
                .ctx("post the echo")?;
        }
        // Replaces the receive just taken (after the echo's send: perftest's order). Never
        // more than the chunk's messages and the fence: nothing is left posted for the next
        // chunk.
        if posted < total {
            post_recv(&mut posted)?;
        }
    }
}
