//! The open IA (`Transport`): device context, PDs, attributes. Connection management and the
//! data path are not implemented yet and return `DAT_NOT_IMPLEMENTED`.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use dat_core::error::{DatError, DatResult, ErrorType, Subtype};
use dat_core::mem::Buffer;
use dat_core::provider::{
    EpConfig, EpUpcalls, IaUpcalls, MemKeys, OpenError, SpUpcalls, SrqConfig, Transport,
    WorkRequest,
};
use dat_core::types::{
    CloseFlags, ConnQual, CrId, EpId, EvdFlags, EvdId, IaAddress, IaAttr, LmrId, MemPriv,
    ProviderAttr, PzId, SpId, SrqId, Timeout, VaType,
};

use crate::attr::{self, DeviceFacts};
use crate::device::{self, Context, FindError, Pd};
use crate::not_found;
use crate::params::{Locator, VerbsParams};

/// `IBV_PORT_ACTIVE`.
const PORT_ACTIVE: u32 = 4;

/// One open verbs IA. Fields drop in declaration order: PDs before the context.
pub struct VerbsIa {
    name: String,
    ia_attr: IaAttr,
    provider_attr: ProviderAttr,
    pds: Mutex<HashMap<PzId, Pd>>,
    ctx: Mutex<Option<Arc<Context>>>,
    _upcalls: Arc<dyn IaUpcalls>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
    /// Finds and opens the device of `params`, queries it and its port.
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
        let ctx =
            Arc::new(Context::open(device.as_deref()).map_err(|e| find_error(ia, origin, e))?);
        let f = facts(&ctx, port, &params, &at)?;
        if f.port_state != PORT_ACTIVE {
            tracing::warn!(
                ia,
                device = ctx.name(),
                port,
                state = f.port_state_name(),
                "verbs port is not ACTIVE: connections will fail until it is"
            );
        }
        tracing::debug!(
            ia,
            device = ctx.name(),
            port,
            link_layer = f.link_layer_name(),
            "verbs IA open"
        );
        Ok(VerbsIa {
            name: ia.to_owned(),
            ia_attr: attr::ia_attr(ia, &f, &params, address),
            provider_attr: attr::provider_attr(&f),
            pds: Mutex::new(HashMap::new()),
            ctx: Mutex::new(Some(ctx)),
            _upcalls: upcalls,
        })
    }
}

fn not_implemented(what: &str) -> DatError {
    tracing::debug!(what, "verbs: not implemented yet");
    DatError::NOT_IMPLEMENTED
}

impl Transport for VerbsIa {
    fn ia_attr(&self) -> IaAttr {
        self.ia_attr.clone()
    }

    fn provider_attr(&self) -> ProviderAttr {
        self.provider_attr.clone()
    }

    fn create_pz(&self, pz: PzId) -> DatResult<()> {
        let Some(ctx) = lock(&self.ctx).clone() else {
            return Err(DatError::resources(Subtype::ResourceProtectionDomain));
        };
        let pd = Pd::alloc(&ctx).map_err(|e| {
            tracing::warn!(ia = %self.name, error = %e, "ibv_alloc_pd failed");
            DatError::resources(Subtype::ResourceProtectionDomain)
        })?;
        lock(&self.pds).insert(pz, pd);
        Ok(())
    }

    fn free_pz(&self, pz: PzId) {
        lock(&self.pds).remove(&pz);
    }

    fn register(
        &self,
        _lmr: LmrId,
        _pz: PzId,
        _buf: &Arc<Buffer>,
        _privs: MemPriv,
        _va_type: VaType,
    ) -> DatResult<Option<MemKeys>> {
        Err(not_implemented("register"))
    }

    fn create_evd(&self, _evd: EvdId, flags: EvdFlags, _qlen: u32) -> DatResult<()> {
        // Connection, CR, software and async events need no verbs object; a DTO EVD needs a
        // CQ, which is not implemented yet.
        if flags.contains(EvdFlags::DTO) {
            return Err(not_implemented("DTO EVD (CQ)"));
        }
        Ok(())
    }

    fn create_ep(&self, _ep: EpId, _cfg: &EpConfig, _up: Arc<dyn EpUpcalls>) -> DatResult<()> {
        Err(not_implemented("create_ep"))
    }

    fn modify_ep(&self, _ep: EpId, _cfg: &EpConfig) -> DatResult<()> {
        Err(not_implemented("modify_ep"))
    }

    fn reset_ep(&self, _ep: EpId) -> DatResult<()> {
        Err(not_implemented("reset_ep"))
    }

    fn free_ep(&self, _ep: EpId) {}

    fn connect(
        &self,
        _ep: EpId,
        _remote: IaAddress,
        _qual: ConnQual,
        _private_data: &[u8],
        _timeout: Timeout,
    ) -> DatResult<()> {
        Err(not_implemented("connect"))
    }

    fn listen(
        &self,
        _sp: SpId,
        _qual: Option<ConnQual>,
        _upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual> {
        Err(not_implemented("listen"))
    }

    fn unlisten(&self, _sp: SpId) {}

    fn accept(&self, _cr: CrId, _ep: EpId, _private_data: &[u8]) -> DatResult<()> {
        Err(not_implemented("accept"))
    }

    fn reject(&self, _cr: CrId, _private_data: &[u8]) -> DatResult<()> {
        Err(not_implemented("reject"))
    }

    fn disconnect(&self, _ep: EpId, _flags: CloseFlags) -> DatResult<()> {
        Err(not_implemented("disconnect"))
    }

    fn post(&self, _ep: EpId, _wr: WorkRequest) -> DatResult<()> {
        Err(not_implemented("post"))
    }

    fn create_srq(&self, _srq: SrqId, _cfg: &SrqConfig) -> DatResult<()> {
        Err(not_implemented("create_srq"))
    }

    fn srq_post_recv(&self, _srq: SrqId, _wr: WorkRequest) -> DatResult<()> {
        Err(not_implemented("srq_post_recv"))
    }

    fn close(&self) {
        // Fixed order: every PD, then the context.
        lock(&self.pds).clear();
        lock(&self.ctx).take();
        tracing::debug!(ia = %self.name, "verbs IA closed");
    }
}
