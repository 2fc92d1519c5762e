//! Opening a verbs IA: finding the device (by name or through an address's route),
//! querying it and its port, and the `DAT_PROVIDER_NOT_FOUND` errors that name the cause.

use super::*;

/// `IBV_PORT_ACTIVE`.
const PORT_ACTIVE: u32 = 4;

const SOFT_ROCE_HINT: &str =
    "for Soft-RoCE: `modprobe rdma_rxe` and `rdma link add rxe0 type rxe netdev <interface>`";

fn is_permission(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

fn find_error(ia: &str, origin: &str, e: FindError) -> OpenError {
    let at = format!("{origin}: IA `{ia}`");
    not_found(match e {
        FindError::List(e) if is_permission(&e) => {
            format!("{at}: no permission to list RDMA devices (ibv_get_device_list: {e})")
        }
        FindError::List(e) => format!(
            "{at}: the kernel has no RDMA support (ibv_get_device_list: {e}; \
             /sys/class/infiniband_verbs is missing): load `ib_uverbs` and a device driver, \
             {SOFT_ROCE_HINT}"
        ),
        FindError::NoDevice => format!(
            "{at}: no RDMA device on this machine (ibv_get_device_list found none; is the \
             driver's kernel module and its libibverbs provider installed?), {SOFT_ROCE_HINT}"
        ),
        FindError::NotFound(names) => format!(
            "{at}: `params.device`: no RDMA device of that name (devices present: {})",
            names.join(", ")
        ),
        FindError::Open(name, e) if is_permission(&e) => format!(
            "{at}: no permission to open RDMA device `{name}` (/dev/infiniband/uverbs*: {e}); \
             check the device node's group and the udev rules"
        ),
        FindError::Open(name, e) => {
            format!("{at}: cannot open RDMA device `{name}` (ibv_open_device: {e})")
        }
    })
}

fn resolve_error(ia: &str, origin: &str, ip: IpAddr, (call, e): (&str, io::Error)) -> OpenError {
    let at = format!("{origin}: IA `{ia}`");
    not_found(match (call, e.raw_os_error()) {
        ("rdma_create_id", Some(libc::ENODEV | libc::ENOENT | libc::ENOSYS)) => format!(
            "{at}: rdma_cm is unavailable ({call}: {e}; /dev/infiniband/rdma_cm is missing): \
             load `rdma_ucm`, {SOFT_ROCE_HINT}"
        ),
        ("rdma_bind_addr", Some(libc::EADDRNOTAVAIL)) => {
            format!("{at}: {ip} is not an address of this host ({call}: {e})")
        }
        ("rdma_bind_addr", Some(libc::ENODEV)) => {
            format!("{at}: {ip} is not the address of an RDMA device's interface ({call}: {e})")
        }
        _ if is_permission(&e) => format!("{at}: no permission to use rdma_cm ({call}: {e})"),
        _ => format!("{at}: cannot resolve {ip} to an RDMA device ({call}: {e})"),
    })
}

fn facts(ctx: &Context, port: u8, p: &VerbsParams, at: &str) -> Result<DeviceFacts, OpenError> {
    let query = |what: &str, e: io::Error| {
        OpenError::new(
            DatError::new(ErrorType::InsufficientResources, Subtype::ResourceDevice),
            format!("{at}: {what} on `{}` failed: {e}", ctx.name()),
        )
    };
    let d = ctx
        .query_device()
        .map_err(|e| query("ibv_query_device", e))?;
    if port == 0 || port > d.phys_port_cnt {
        return Err(not_found(format!(
            "{at}: `params.port`: device `{}` has no port {port} (its ports: 1..={})",
            ctx.name(),
            d.phys_port_cnt
        )));
    }
    let pa = ctx
        .query_port(port)
        .map_err(|e| query("ibv_query_port", e))?;
    if i32::from(p.gid_index) >= pa.gid_tbl_len {
        return Err(OpenError::new(
            DatError::new(ErrorType::InvalidParameter, Subtype::NoSubtype),
            format!(
                "{at}: `params.gid_index`: {} is beyond the GID table of `{}` port {port} \
                 ({} entries)",
                p.gid_index,
                ctx.name(),
                pa.gid_tbl_len
            ),
        ));
    }
    let gid = ctx
        .query_gid(port, p.gid_index)
        .map_err(|e| query("ibv_query_gid", e))?;
    let fw = d.fw_ver.iter().take_while(|&&c| c != 0).map(|&c| c as u8);
    let nonneg = |v: i32| u32::try_from(v).unwrap_or(0);
    Ok(DeviceFacts {
        device: ctx.name().to_owned(),
        port,
        fw_ver: String::from_utf8_lossy(&fw.collect::<Vec<u8>>()).into_owned(),
        node_guid: u64::from_be(d.node_guid),
        vendor_id: d.vendor_id,
        vendor_part_id: d.vendor_part_id,
        hw_ver: d.hw_ver,
        max_mr_size: d.max_mr_size,
        max_qp: nonneg(d.max_qp),
        max_qp_wr: nonneg(d.max_qp_wr),
        max_sge: nonneg(d.max_sge),
        max_sge_rd: nonneg(d.max_sge_rd),
        max_cq: nonneg(d.max_cq),
        max_cqe: nonneg(d.max_cqe),
        max_mr: nonneg(d.max_mr),
        max_pd: nonneg(d.max_pd),
        max_qp_rd_atom: nonneg(d.max_qp_rd_atom),
        max_qp_init_rd_atom: nonneg(d.max_qp_init_rd_atom),
        max_res_rd_atom: nonneg(d.max_res_rd_atom),
        max_mw: nonneg(d.max_mw),
        max_srq: nonneg(d.max_srq),
        max_srq_wr: nonneg(d.max_srq_wr),
        phys_port_cnt: d.phys_port_cnt,
        port_state: pa.state,
        active_mtu: pa.active_mtu,
        max_msg_sz: pa.max_msg_sz,
        lid: pa.lid,
        link_layer: pa.link_layer,
        gid_tbl_len: pa.gid_tbl_len,
        gid,
    })
}

impl VerbsIa {
    /// Finds and opens the device of `params`, queries it and its port, and starts the event
    /// thread.
    pub fn open(
        ia: &str,
        origin: &str,
        params: VerbsParams,
        upcalls: Arc<dyn IaUpcalls>,
    ) -> Result<VerbsIa, OpenError> {
        let at = format!("{origin}: IA `{ia}`");
        let (device, port, address) = match &params.locator {
            Locator::Device { name, port } => (name.clone(), *port, None),
            Locator::Address { ip, .. } => {
                let (dev, port) =
                    device::resolve_address(*ip).map_err(|e| resolve_error(ia, origin, *ip, e))?;
                (Some(dev), port, Some(*ip))
            }
        };
        let f = {
            let probe = Context::open(device.as_deref()).map_err(|e| find_error(ia, origin, e))?;
            facts(&probe, port, &params, &at)?
        };
        if f.port_state != PORT_ACTIVE {
            tracing::warn!(
                ia,
                device = %f.device,
                port,
                state = f.port_state_name(),
                "verbs port is not ACTIVE: connections will fail until it is"
            );
        }
        // PDs, CQs and QPs live on librdmacm's context of the device: rdma_create_qp requires
        // the PD on the context of the rdma_cm_id (see the README's design note).
        let ctx = Arc::new(Context::rdma_cm(&f.device).map_err(|e| {
            not_found(format!(
                "{at}: rdma_cm does not offer device `{}` (rdma_get_devices: {e}); load \
                 `rdma_ucm`, {SOFT_ROCE_HINT}",
                f.device
            ))
        })?);
        let ia_attr = attr::ia_attr(ia, &f, &params, address);
        let limits = Limits {
            max_qp_rd_atom: f.max_qp_rd_atom,
            max_qp_init_rd_atom: f.max_qp_init_rd_atom,
            max_sge: f.max_sge,
            max_qp_wr: f.max_qp_wr,
            max_cqe: f.max_cqe,
        };
        let resources = |what: &str, e: io::Error| {
            OpenError::new(
                DatError::resources(Subtype::NoSubtype),
                format!("{at}: {what} failed: {e}"),
            )
        };
        let shared = Shared::new(ia, params, ia_attr.ia_address.ip(), limits, ctx, upcalls)
            .map_err(|e| {
                resources(
                    "creating the rdma_cm event channel or completion channel",
                    e,
                )
            })?;
        let shared = Arc::new(shared);
        crate::ia::attach(&shared)
            .map_err(|e| resources("making the device's event descriptor non-blocking", e))?;
        let runner = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("dat-verbs-{ia}"))
            .spawn(move || runner.run())
            .map_err(|e| resources("starting the event thread", e))?;
        tracing::debug!(ia, device = %f.device, port, link_layer = f.link_layer_name(), "verbs IA open");
        Ok(VerbsIa {
            name: ia.to_owned(),
            ia_attr,
            provider_attr: attr::provider_attr(&f),
            shared,
            thread: Mutex::new(Some(thread)),
            closed: AtomicBool::new(false),
        })
    }
}
