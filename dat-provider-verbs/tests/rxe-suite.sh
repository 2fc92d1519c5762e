#!/usr/bin/env bash
# Runs the DAT conformance suite on the verbs provider against Soft-RoCE (rxe0) in the
# throwaway VM of ../shared/rxe-vm: builds the test binary on the host, boots one VM and runs
# every case there (IA `rxe0` of dat-provider-verbs/tests/rxe.toml).
#
#   dat-provider-verbs/tests/rxe-suite.sh            # the whole suite
#   dat-provider-verbs/tests/rxe-suite.sh --short    # the CI subset: connect, private data,
#                                                    # reject, send/recv, RDMA write/read,
#                                                    # a zero-based LMR (RDMA, inline and
#                                                    # ordinary posts), disconnect; both then check for
#                                                    # leaks after a connection storm
#   dat-provider-verbs/tests/rxe-suite.sh -- FILTER  # libtest arguments of your own
#
# Environment: RXE_VM (the rxe-vm script; default ../shared/rxe-vm/rxe-vm beside the
# checkout, else /work/shared/rxe-vm/rxe-vm), RXE_SUITE_TIMEOUT (seconds for the whole VM,
# default 1500; 600 with --short), RXE_SUITE_THREADS (libtest threads in the guest, default 2),
# RXE_SUITE_REPEAT (run the whole sequence that many times in the one VM, stopping at the first
# failure, default 1: races that show once in tens of runs; raise the timeout with it). Exit
# status: the suite's; 124 when the VM ran out of time, 125 when the VM could not run.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vm=${RXE_VM:-$root/../shared/rxe-vm/rxe-vm}
# The harness lives beside the checkout on the development machines and in /work/shared on CI.
[ -n "${RXE_VM:-}" ] || [ -x "$vm" ] || vm=/work/shared/rxe-vm/rxe-vm
short=0
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --short) short=1 ;;
        --) shift; args+=("$@"); break ;;
        *) echo "usage: $0 [--short] [-- LIBTEST-ARGS...]" >&2; exit 2 ;;
    esac
    shift
done
if [ "$short" = 1 ]; then
    args+=(--exact
        verbs::accept_private_data_both_ways
        verbs::private_data_limits
        verbs::reject_private_data_then_reconnect
        verbs::connect_to_nobody
        verbs::send_recv_basic
        verbs::send_gather
        verbs::rdma_write_basic
        verbs::rdma_read_basic
        verbs::zero_based_lmr
        verbs::passive_side_disconnects
        verbs::disconnect_flushes_recvs)
fi
# The leak checks count the whole device's resources, the event-thread case counts the sleeps
# of every verbs event thread of the process and the removal case removes the device, so they
# run alone after the suite (each skips itself elsewhere), in the full run and the
# short one; the removal ends once its process has exited, and the device is then put back.
storm=0
{ [ "$short" = 1 ] || [ ${#args[@]} -eq 0 ]; } && storm=1
timeout=${RXE_SUITE_TIMEOUT:-$([ "$short" = 1 ] && echo 600 || echo 1500)}

if [ ! -x "$vm" ]; then
    echo "rxe-suite: no rxe-vm at $vm (set RXE_VM)" >&2
    exit 125
fi
bin=$(cargo test -p dat-tests --features verbs --test verbs --no-run --message-format=json \
    | jq -r 'select(.profile.test == true) | .executable | select(. != null)' | tail -n 1)
if [ -z "$bin" ]; then
    echo "rxe-suite: cargo built no test binary" >&2
    exit 125
fi
echo "rxe-suite: $bin in the VM ($([ "$short" = 1 ] && echo short || echo full))" >&2
exec "$vm" --timeout "$timeout" \
    --env DAT_CONF="$root/dat-provider-verbs/tests/rxe.toml" \
    --env RUST_LOG="${RUST_LOG:-warn}" \
    -- bash -c 'set -e
        bin=$1 threads=$2 storm=$3 repeat=$4; shift 4
        for round in $(seq "$repeat"); do
            [ "$repeat" = 1 ] || echo "rxe-suite: round $round of $repeat" >&2
            "$bin" --test-threads "$threads" "$@"
            if [ "$storm" = 1 ]; then
                DAT_TEST_DEVICE_EXCLUSIVE=1 "$bin" --exact no_device_resources_left_after_a_disconnect_storm
                DAT_TEST_DEVICE_EXCLUSIVE=1 "$bin" --exact dequeued_evd_frees_its_cq_and_close_frees_the_rest
                DAT_TEST_DEVICE_EXCLUSIVE=1 "$bin" --exact queued_takes_keep_the_verbs_event_thread_asleep
                DAT_TEST_DEVICE_EXCLUSIVE=1 "$bin" --exact device_removal_is_catastrophic_and_calls_fail_cleanly
                for _ in $(seq 300); do
                    rdma link show "$RXE_DEV/1" >/dev/null 2>&1 || break
                    sleep 0.2
                done
                rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"
                rdma link show "$RXE_DEV/1"
            fi
        done' rxe-suite "$bin" "${RXE_SUITE_THREADS:-2}" "$storm" "${RXE_SUITE_REPEAT:-1}" "${args[@]}"
