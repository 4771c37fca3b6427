//! The system's GSS-API (MIT Kerberos, `libgssapi_krb5.so.2`), loaded at
//! run time the first time GSSAPI is configured, so that kcoord builds and
//! runs without Kerberos installed and only a GSSAPI listener or login
//! needs it. Only what SASL/GSSAPI (RFC 4752) uses is bound: names,
//! credentials from a keytab, context establishment, and wrap/unwrap of the
//! security-layer messages.
//!
//! Every handle is owned by one Rust value and released on drop; none is
//! shared between threads at the same time (MIT's rule for GSS objects).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

type Status = u32;
type NameHandle = *mut c_void;
type CredHandle = *mut c_void;
type CtxHandle = *mut c_void;

#[repr(C)]
struct BufferDesc {
    length: usize,
    value: *mut c_void,
}

impl BufferDesc {
    const EMPTY: BufferDesc = BufferDesc { length: 0, value: std::ptr::null_mut() };

    /// Borrows `bytes` as an input buffer (GSS-API never writes to those).
    fn input(bytes: &[u8]) -> BufferDesc {
        BufferDesc { length: bytes.len(), value: bytes.as_ptr() as *mut c_void }
    }
}

#[repr(C)]
struct OidDesc {
    length: u32,
    elements: *mut c_void,
}

#[repr(C)]
struct KeyValue {
    key: *const c_char,
    value: *const c_char,
}

#[repr(C)]
struct KeyValueSet {
    count: u32,
    elements: *const KeyValue,
}

/// DER bodies of the OIDs used (RFC 2743, RFC 1964).
const NT_HOSTBASED_SERVICE: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04";
const NT_KRB5_PRINCIPAL: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";
const MECH_KRB5: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02";

fn oid(der: &'static [u8]) -> OidDesc {
    OidDesc { length: der.len() as u32, elements: der.as_ptr() as *mut c_void }
}

const COMPLETE: Status = 0;
const CONTINUE_NEEDED: Status = 1;
const C_GSS_CODE: c_int = 1;
const C_MECH_CODE: c_int = 2;
const C_INITIATE: c_int = 1;
const C_ACCEPT: c_int = 2;
/// Mutual authentication and in-sequence messages, as Cyrus SASL's and
/// Java's GSSAPI clients ask for; integrity for the security-layer
/// messages.
const INIT_FLAGS: u32 = 2 | 8 | 32;

fn is_error(major: Status) -> bool {
    major & 0xffff_0000 != 0
}

type ImportName = unsafe extern "C" fn(*mut Status, *mut BufferDesc, *mut OidDesc, *mut NameHandle) -> Status;
type AcquireCredFrom = unsafe extern "C" fn(
    *mut Status,
    NameHandle,
    u32,
    *mut c_void,
    c_int,
    *const KeyValueSet,
    *mut CredHandle,
    *mut c_void,
    *mut u32,
) -> Status;
type InitSecContext = unsafe extern "C" fn(
    *mut Status,
    CredHandle,
    *mut CtxHandle,
    NameHandle,
    *mut OidDesc,
    u32,
    u32,
    *mut c_void,
    *mut BufferDesc,
    *mut c_void,
    *mut BufferDesc,
    *mut u32,
    *mut u32,
) -> Status;
type AcceptSecContext = unsafe extern "C" fn(
    *mut Status,
    *mut CtxHandle,
    CredHandle,
    *mut BufferDesc,
    *mut c_void,
    *mut NameHandle,
    *mut c_void,
    *mut BufferDesc,
    *mut u32,
    *mut u32,
    *mut c_void,
) -> Status;
type Wrap =
    unsafe extern "C" fn(*mut Status, CtxHandle, c_int, u32, *mut BufferDesc, *mut c_int, *mut BufferDesc) -> Status;
type Unwrap =
    unsafe extern "C" fn(*mut Status, CtxHandle, *mut BufferDesc, *mut BufferDesc, *mut c_int, *mut u32) -> Status;
type DisplayName = unsafe extern "C" fn(*mut Status, NameHandle, *mut BufferDesc, *mut c_void) -> Status;
type DisplayStatus =
    unsafe extern "C" fn(*mut Status, Status, c_int, *mut OidDesc, *mut u32, *mut BufferDesc) -> Status;
type ReleaseBuffer = unsafe extern "C" fn(*mut Status, *mut BufferDesc) -> Status;
type ReleaseHandle = unsafe extern "C" fn(*mut Status, *mut *mut c_void) -> Status;
type DeleteSecContext = unsafe extern "C" fn(*mut Status, *mut CtxHandle, *mut BufferDesc) -> Status;
type KrbInitContext = unsafe extern "C" fn(*mut *mut c_void) -> i32;
type KrbFreeContext = unsafe extern "C" fn(*mut c_void);
type KrbGetDefaultRealm = unsafe extern "C" fn(*mut c_void, *mut *mut c_char) -> i32;
type KrbFreeDefaultRealm = unsafe extern "C" fn(*mut c_void, *mut c_char);

/// The loaded functions. The libraries stay loaded for the life of the
/// process (never `dlclose`d), so the pointers stay valid.
struct Gss {
    import_name: ImportName,
    acquire_cred_from: AcquireCredFrom,
    init_sec_context: InitSecContext,
    accept_sec_context: AcceptSecContext,
    wrap: Wrap,
    unwrap: Unwrap,
    display_name: DisplayName,
    display_status: DisplayStatus,
    release_buffer: ReleaseBuffer,
    release_name: ReleaseHandle,
    release_cred: ReleaseHandle,
    delete_sec_context: DeleteSecContext,
    default_realm: String,
}

const GSS_LIBRARY: &str = "libgssapi_krb5.so.2";
const KRB5_LIBRARY: &str = "libkrb5.so.3";

/// Loads the library once; the error says what to install.
fn gss() -> Result<&'static Gss, String> {
    static LOADED: OnceLock<Result<Gss, String>> = OnceLock::new();
    LOADED.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Checks that GSS-API can be used (a configuration check at start-up).
pub fn available() -> Result<(), String> {
    gss().map(|_| ())
}

/// The default realm of the Kerberos configuration (`KRB5_CONFIG`, else
/// `/etc/krb5.conf`); empty when there is none, as in Kafka.
pub fn default_realm() -> Result<String, String> {
    gss().map(|g| g.default_realm.clone())
}

fn open(library: &str) -> Result<*mut c_void, String> {
    let name = CString::new(library).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a valid C string; the handle is never closed.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!(
            "GSSAPI needs MIT Kerberos' {library} (Debian: libgssapi-krb5-2 and libkrb5-3), which could not be loaded"
        ));
    }
    Ok(handle)
}

fn symbol(library: *mut c_void, name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: dlsym on a live handle with a valid C string.
    let f = unsafe { libc::dlsym(library, c.as_ptr()) };
    if f.is_null() {
        return Err(format!("{name} is missing from the Kerberos library (MIT Kerberos 1.11 or later is needed)"));
    }
    Ok(f)
}

fn load() -> Result<Gss, String> {
    let lib = open(GSS_LIBRARY)?;
    let krb = open(KRB5_LIBRARY)?;
    macro_rules! bind {
        ($lib:expr, $name:literal, $ty:ty) => {{
            let f = symbol($lib, $name)?;
            // SAFETY: the symbol has this C signature in MIT's gssapi.h /
            // krb5.h (x86-64 and aarch64 LP64 layouts).
            unsafe { std::mem::transmute::<*mut c_void, $ty>(f) }
        }};
    }
    let default_realm = {
        let init = bind!(krb, "krb5_init_context", KrbInitContext);
        let free = bind!(krb, "krb5_free_context", KrbFreeContext);
        let get = bind!(krb, "krb5_get_default_realm", KrbGetDefaultRealm);
        let free_realm = bind!(krb, "krb5_free_default_realm", KrbFreeDefaultRealm);
        let mut ctx = std::ptr::null_mut();
        let mut realm = String::new();
        // SAFETY: MIT's documented calling sequence; every allocation is
        // freed with its own function.
        unsafe {
            if init(&mut ctx) == 0 {
                let mut r: *mut c_char = std::ptr::null_mut();
                if get(ctx, &mut r) == 0 && !r.is_null() {
                    realm = CStr::from_ptr(r).to_string_lossy().into_owned();
                    free_realm(ctx, r);
                }
                free(ctx);
            }
        }
        realm
    };
    Ok(Gss {
        import_name: bind!(lib, "gss_import_name", ImportName),
        acquire_cred_from: bind!(lib, "gss_acquire_cred_from", AcquireCredFrom),
        init_sec_context: bind!(lib, "gss_init_sec_context", InitSecContext),
        accept_sec_context: bind!(lib, "gss_accept_sec_context", AcceptSecContext),
        wrap: bind!(lib, "gss_wrap", Wrap),
        unwrap: bind!(lib, "gss_unwrap", Unwrap),
        display_name: bind!(lib, "gss_display_name", DisplayName),
        display_status: bind!(lib, "gss_display_status", DisplayStatus),
        release_buffer: bind!(lib, "gss_release_buffer", ReleaseBuffer),
        release_name: bind!(lib, "gss_release_name", ReleaseHandle),
        release_cred: bind!(lib, "gss_release_cred", ReleaseHandle),
        delete_sec_context: bind!(lib, "gss_delete_sec_context", DeleteSecContext),
        default_realm,
    })
}

impl Gss {
    /// Copies and releases a buffer GSS-API allocated.
    fn take(&self, mut buffer: BufferDesc) -> Vec<u8> {
        let bytes = if buffer.value.is_null() || buffer.length == 0 {
            Vec::new()
        } else {
            // SAFETY: GSS-API returned `length` readable bytes at `value`.
            unsafe { std::slice::from_raw_parts(buffer.value as *const u8, buffer.length).to_vec() }
        };
        let mut minor = 0;
        // SAFETY: releasing a buffer the library allocated, once.
        unsafe { (self.release_buffer)(&mut minor, &mut buffer) };
        bytes
    }

    /// The library's text for a failed call, both status codes.
    fn describe(&self, what: &str, major: Status, minor: Status) -> String {
        let mut parts = Vec::new();
        for (code, kind) in [(major, C_GSS_CODE), (minor, C_MECH_CODE)] {
            if code == 0 {
                continue;
            }
            let mut context = 0u32;
            for _ in 0..8 {
                let (mut m, mut out) = (0, BufferDesc::EMPTY);
                let mut mech = oid(MECH_KRB5);
                // SAFETY: out-parameters owned here; the buffer is taken.
                let r = unsafe { (self.display_status)(&mut m, code, kind, &mut mech, &mut context, &mut out) };
                if is_error(r) {
                    break;
                }
                let text = String::from_utf8_lossy(&self.take(out)).into_owned();
                if !text.is_empty() {
                    parts.push(text);
                }
                if context == 0 {
                    break;
                }
            }
        }
        if parts.is_empty() {
            parts.push(format!("major {major:#x}, minor {minor}"));
        }
        format!("{what}: {}", parts.join("; "))
    }

    fn check(&self, what: &str, major: Status, minor: Status) -> Result<Status, String> {
        if is_error(major) {
            Err(self.describe(what, major, minor))
        } else {
            Ok(major)
        }
    }
}

/// A GSS-API name.
pub struct Name {
    gss: &'static Gss,
    handle: NameHandle,
}

/// Which form a name is given in.
#[derive(Debug, Clone, Copy)]
pub enum NameForm {
    /// `service@host` (RFC 2743 host-based service).
    HostBasedService,
    /// `primary/instance@REALM` (a Kerberos principal).
    Principal,
}

// SAFETY: a name is used by one thread at a time (it moves with the
// login that owns it).
unsafe impl Send for Name {}

impl Name {
    pub fn import(text: &str, form: NameForm) -> Result<Name, String> {
        let gss = gss()?;
        let mut kind = match form {
            NameForm::HostBasedService => oid(NT_HOSTBASED_SERVICE),
            NameForm::Principal => oid(NT_KRB5_PRINCIPAL),
        };
        let mut buffer = BufferDesc::input(text.as_bytes());
        let (mut minor, mut handle) = (0, std::ptr::null_mut());
        // SAFETY: inputs outlive the call; the handle is owned by the result.
        let major = unsafe { (gss.import_name)(&mut minor, &mut buffer, &mut kind, &mut handle) };
        gss.check(&format!("the Kerberos name {text:?}"), major, minor)?;
        Ok(Name { gss, handle })
    }

    /// The name as text, `primary[/instance]@REALM` for Kerberos.
    pub fn display(&self) -> Result<String, String> {
        let (mut minor, mut out) = (0, BufferDesc::EMPTY);
        // SAFETY: a live name; the output buffer is taken.
        let major = unsafe { (self.gss.display_name)(&mut minor, self.handle, &mut out, std::ptr::null_mut()) };
        self.gss.check("displaying a Kerberos name", major, minor)?;
        Ok(String::from_utf8_lossy(&self.gss.take(out)).into_owned())
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: the name is owned here and released once.
        unsafe { (self.gss.release_name)(&mut minor, &mut self.handle) };
    }
}

/// Initiator or acceptor credentials.
pub struct Credential {
    gss: &'static Gss,
    handle: CredHandle,
}

// SAFETY: a credential is used by one thread at a time (it moves with the
// exchange that owns it), which MIT allows.
unsafe impl Send for Credential {}

impl Credential {
    /// Acceptor credentials from `keytab`: for `principal` if given, else
    /// for any key in the keytab.
    pub fn acceptor(keytab: &str, principal: Option<&str>) -> Result<Credential, String> {
        let name = principal.map(|p| Name::import(p, NameForm::Principal)).transpose()?;
        Self::acquire(name.as_ref(), C_ACCEPT, &[("keytab", keytab)], &format!("the keytab {keytab}"))
    }

    /// Initiator credentials for `principal`, logged in from `keytab` into
    /// a ccache private to this process (renewed from the keytab by the
    /// library when the tickets near their end). Without a keytab: the
    /// default ccache (`KRB5CCNAME`, a `kinit` by the operator).
    pub fn initiator(principal: Option<&str>, keytab: Option<&str>) -> Result<Credential, String> {
        let name = principal.map(|p| Name::import(p, NameForm::Principal)).transpose()?;
        let ccache;
        let store: Vec<(&str, &str)> = match keytab {
            Some(kt) => {
                let who: String = principal
                    .unwrap_or("default")
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                ccache = format!("MEMORY:kcoord-{}-{who}", std::process::id());
                vec![("client_keytab", kt), ("ccache", ccache.as_str())]
            }
            None => Vec::new(),
        };
        let what = match (principal, keytab) {
            (Some(p), Some(kt)) => format!("logging in as {p} with the keytab {kt}"),
            (Some(p), None) => format!("the credentials of {p} in the default ticket cache"),
            (None, _) => "the default Kerberos credentials".to_string(),
        };
        Self::acquire(name.as_ref(), C_INITIATE, &store, &what)
    }

    fn acquire(name: Option<&Name>, usage: c_int, store: &[(&str, &str)], what: &str) -> Result<Credential, String> {
        let gss = gss()?;
        let owned: Vec<(CString, CString)> = store
            .iter()
            .map(|(k, v)| {
                Ok((CString::new(*k).map_err(|e| e.to_string())?, CString::new(*v).map_err(|e| e.to_string())?))
            })
            .collect::<Result<_, String>>()?;
        let elements: Vec<KeyValue> =
            owned.iter().map(|(k, v)| KeyValue { key: k.as_ptr(), value: v.as_ptr() }).collect();
        let set = KeyValueSet { count: elements.len() as u32, elements: elements.as_ptr() };
        // No store: the library's defaults (KRB5CCNAME, KRB5_KTNAME).
        let store: *const KeyValueSet = if elements.is_empty() { std::ptr::null() } else { &set };
        let (mut minor, mut handle) = (0, std::ptr::null_mut());
        let name = name.map_or(std::ptr::null_mut(), |n| n.handle);
        // SAFETY: every pointer refers to data alive for the call.
        let major = unsafe {
            (gss.acquire_cred_from)(
                &mut minor,
                name,
                0,
                std::ptr::null_mut(),
                usage,
                store,
                &mut handle,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        gss.check(what, major, minor)?;
        Ok(Credential { gss, handle })
    }
}

impl Drop for Credential {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: owned and released once.
        unsafe { (self.gss.release_cred)(&mut minor, &mut self.handle) };
    }
}

/// One security context, either side.
pub struct Context {
    gss: &'static Gss,
    handle: CtxHandle,
    established: bool,
}

// SAFETY: a context is used by one thread at a time (it moves with the
// connection that owns it), which MIT allows.
unsafe impl Send for Context {}

/// What a context-establishment step produced.
pub struct Step {
    /// The token for the peer; may be empty.
    pub token: Vec<u8>,
    /// The context is established (no more tokens are needed from the peer).
    pub established: bool,
}

impl Context {
    pub fn new() -> Result<Context, String> {
        Ok(Context { gss: gss()?, handle: std::ptr::null_mut(), established: false })
    }

    pub fn is_established(&self) -> bool {
        self.established
    }

    /// The initiator's next step towards `target`, given the acceptor's
    /// last token (`None` at first).
    pub fn initiate(&mut self, cred: &Credential, target: &Name, input: Option<&[u8]>) -> Result<Step, String> {
        let mut input = input.map(BufferDesc::input);
        let input_ptr = input.as_mut().map_or(std::ptr::null_mut(), |b| b as *mut BufferDesc);
        let (mut minor, mut out) = (0, BufferDesc::EMPTY);
        let mut mech = oid(MECH_KRB5);
        // SAFETY: the handles are live; the output buffer is taken below.
        let major = unsafe {
            (self.gss.init_sec_context)(
                &mut minor,
                cred.handle,
                &mut self.handle,
                target.handle,
                &mut mech,
                INIT_FLAGS,
                0,
                std::ptr::null_mut(),
                input_ptr,
                std::ptr::null_mut(),
                &mut out,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        let token = self.gss.take(out);
        let major = self.gss.check("Kerberos authentication", major, minor)?;
        self.established = major & 0xffff == COMPLETE;
        Ok(Step { token, established: self.established })
    }

    /// The acceptor's step on the initiator's `input`. Once established,
    /// also returns the initiator's name.
    pub fn accept(&mut self, cred: &Credential, input: &[u8]) -> Result<(Step, Option<String>), String> {
        let mut input = BufferDesc::input(input);
        let (mut minor, mut out, mut source) = (0, BufferDesc::EMPTY, std::ptr::null_mut());
        // SAFETY: as above; the source name is owned by a `Name` below.
        let major = unsafe {
            (self.gss.accept_sec_context)(
                &mut minor,
                &mut self.handle,
                cred.handle,
                &mut input,
                std::ptr::null_mut(),
                &mut source,
                std::ptr::null_mut(),
                &mut out,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        let token = self.gss.take(out);
        let source = (!source.is_null()).then_some(Name { gss: self.gss, handle: source });
        let major = self.gss.check("Kerberos authentication", major, minor)?;
        self.established = major & 0xffff == COMPLETE;
        if !self.established && major & 0xffff != CONTINUE_NEEDED {
            return Err(format!("Kerberos authentication: unexpected status {major:#x}"));
        }
        let peer = match (&source, self.established) {
            (Some(n), true) => Some(n.display()?),
            _ => None,
        };
        Ok((Step { token, established: self.established }, peer))
    }

    /// Integrity-protects `message` (no confidentiality: the SASL security
    /// layer messages only).
    pub fn wrap(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        let mut input = BufferDesc::input(message);
        let (mut minor, mut out) = (0, BufferDesc::EMPTY);
        // SAFETY: a live, established context.
        let major =
            unsafe { (self.gss.wrap)(&mut minor, self.handle, 0, 0, &mut input, std::ptr::null_mut(), &mut out) };
        let token = self.gss.take(out);
        self.gss.check("wrapping a SASL security-layer message", major, minor)?;
        Ok(token)
    }

    pub fn unwrap(&self, token: &[u8]) -> Result<Vec<u8>, String> {
        let mut input = BufferDesc::input(token);
        let (mut minor, mut out) = (0, BufferDesc::EMPTY);
        // SAFETY: a live, established context.
        let major = unsafe {
            (self.gss.unwrap)(&mut minor, self.handle, &mut input, &mut out, std::ptr::null_mut(), std::ptr::null_mut())
        };
        let message = self.gss.take(out);
        self.gss.check("unwrapping a SASL security-layer message", major, minor)?;
        Ok(message)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            let mut minor = 0;
            // SAFETY: owned and deleted once; no output token is wanted.
            unsafe { (self.gss.delete_sec_context)(&mut minor, &mut self.handle, std::ptr::null_mut()) };
        }
    }
}
