//! Control credentials (the reference's 0.6 control plane): who may release a held gate,
//! change breakpoints, or edit an input.
//!
//! At start the server mints two 128-bit tokens: the **viewer** token (full control; it
//! reaches the browser only in the URL fragment of the redirect file) and the **agent**
//! token (for `graphmind resume`, limited by `serve --allow-control`). HTTP presents a
//! token as `Authorization: Bearer <token>`; a browser WebSocket as the subprotocol
//! `gm.auth.<token>` beside `graphmind.v1`. Tokens are compared in constant time over
//! SHA-256 digests. A client with no credential is `anonymous`: it may continue, retry
//! and abort (deprecated 0.5 behaviour), never inject, edit or change breakpoints.
//!
//! The run files (`$GRAPHMIND_HOME/run/serve-<port>.json` with the agent token and
//! `open-<port>.html` redirecting to the viewer with its token, which `graphmind open`
//! reads) live in a 0700 folder as
//! 0600 files and are removed when the server exits.

use crate::util::js;
use graphmind_core::edit_input::{proposed_value_refusal, RefusalCode};
use graphmind_core::json::{self, Value};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The only subprotocol `/ws/ui` selects.
pub const UI_SUBPROTOCOL: &str = "graphmind.v1";
/// Prefix of the subprotocol entry that carries a token on `/ws/ui`.
pub const AUTH_SUBPROTOCOL_PREFIX: &str = "gm.auth.";
/// `hello.ack.hubCapabilities`: the hub keeps a pause registry.
pub const HUB_CAPABILITY_PAUSE_REGISTRY: &str = "pause-registry";
/// `hello.ack.hubCapabilities`: the hub forwards input edits.
pub const HUB_CAPABILITY_EDIT_INPUT: &str = "edit-input";
/// Longest `operator` label kept, in code points.
pub const MAX_OPERATOR_CHARS: usize = 64;
/// Mode of the run folder.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the run files.
pub const FILE_MODE: u32 = 0o600;

/// Who a control request came from; stamped on the stored `exec.resumed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Principal {
    /// The viewer token.
    Viewer,
    /// The agent token.
    Agent,
    /// No credential.
    Anonymous,
}

impl Principal {
    /// `viewer`, `agent` or `anonymous`.
    pub fn as_str(self) -> &'static str {
        match self {
            Principal::Viewer => "viewer",
            Principal::Agent => "agent",
            Principal::Anonymous => "anonymous",
        }
    }
}

/// `serve --allow-control`: what the agent token may do, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ControlLevel {
    /// Nothing (the default).
    #[default]
    Off,
    /// Continue, retry, abort; breakpoints and step mode.
    Resume,
    /// ... and inject a result.
    Inject,
    /// ... and edit a held call's input.
    Edit,
}

impl ControlLevel {
    /// Parses `off|resume|inject|edit` (trimmed, any case).
    pub fn parse(raw: &str) -> Option<ControlLevel> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "off" => Some(ControlLevel::Off),
            "resume" => Some(ControlLevel::Resume),
            "inject" => Some(ControlLevel::Inject),
            "edit" => Some(ControlLevel::Edit),
            _ => None,
        }
    }

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ControlLevel::Off => "off",
            ControlLevel::Resume => "resume",
            ControlLevel::Inject => "inject",
            ControlLevel::Edit => "edit",
        }
    }
}

/// The server's control policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlPolicy {
    /// What the agent token may do.
    pub agent_level: ControlLevel,
    /// False under `--no-edit-input`.
    pub edit_input: bool,
}

impl Default for ControlPolicy {
    fn default() -> Self {
        ControlPolicy {
            agent_level: ControlLevel::Off,
            edit_input: true,
        }
    }
}

impl ControlPolicy {
    /// `hello.ack.hubCapabilities` / `GET /api/session`.
    pub fn hub_capabilities(&self) -> &'static [&'static str] {
        if self.edit_input {
            &[HUB_CAPABILITY_PAUSE_REGISTRY, HUB_CAPABILITY_EDIT_INPUT]
        } else {
            &[HUB_CAPABILITY_PAUSE_REGISTRY]
        }
    }

    /// The capabilities as a JSON array.
    pub fn hub_capabilities_json(&self) -> String {
        graphmind_core::json::to_string(&self.hub_capabilities_value())
    }

    /// The capabilities as a JSON value.
    pub fn hub_capabilities_value(&self) -> graphmind_core::json::Value {
        crate::util::strings(self.hub_capabilities().iter().copied())
    }
}

/// A refusal: a code and a message that quotes no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `forbidden`, `edit-refused`, `placeholder`, `truncated`, ...
    pub code: &'static str,
    /// Human text.
    pub message: String,
}

/// The two tokens of one server process.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// `gmv_` + 32 hex digits.
    pub viewer: String,
    /// `gma_` + 32 hex digits.
    pub agent: String,
}

impl Tokens {
    /// Two fresh 128-bit tokens from the OS random source; no guessable fallback: a server
    /// whose OS gives no randomness does not start.
    pub fn generate() -> Result<Tokens, graphmind_core::random::RandomError> {
        use graphmind_core::random::hex;
        Ok(Tokens {
            viewer: format!("gmv_{}", hex::<16>()?),
            agent: format!("gma_{}", hex::<16>()?),
        })
    }
}

/// Identifies a presented token in constant time.
pub struct Verifier {
    viewer: [u8; 32],
    agent: [u8; 32],
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// Compares two digests without an early exit.
pub fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for i in 0..32 {
        diff |= a[i] ^ b[i];
    }
    // Keep the optimiser from short-circuiting the loop.
    std::hint::black_box(diff) == 0
}

impl Verifier {
    /// A verifier for these tokens.
    pub fn new(tokens: &Tokens) -> Verifier {
        Verifier {
            viewer: digest(&tokens.viewer),
            agent: digest(&tokens.agent),
        }
    }

    /// Which token `presented` is. Both digests are always compared.
    pub fn identify(&self, presented: &str) -> Option<Principal> {
        let d = digest(presented);
        let viewer = constant_time_eq(&d, &self.viewer);
        let agent = constant_time_eq(&d, &self.agent);
        if viewer {
            Some(Principal::Viewer)
        } else if agent {
            Some(Principal::Agent)
        } else {
            None
        }
    }
}

/// What a request's credentials resolve to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// No credential presented.
    None,
    /// A valid token.
    Ok(Principal),
    /// A malformed, conflicting or unknown credential: refused, never downgraded.
    Invalid(&'static str),
}

/// The token of an `Authorization` header: `None` when absent or blank, `Some(None)` when
/// present but not `Bearer <token>` (refused, not "no credential").
pub fn bearer_token(header: Option<&str>) -> Option<Option<String>> {
    let h = header?;
    if h.trim().is_empty() {
        return None;
    }
    let (scheme, rest) = match h.find([' ', '\t']) {
        Some(i) => (&h[..i], &h[i..]),
        None => return Some(None),
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Some(None);
    }
    let token = rest.trim_matches([' ', '\t']);
    if token.is_empty() || !token.bytes().all(|b| (b'!'..=b'~').contains(&b)) {
        return Some(None);
    }
    Some(Some(token.to_owned()))
}

/// Every `gm.auth.<token>` entry of the `Sec-WebSocket-Protocol` headers.
pub fn subprotocol_tokens<'a>(headers: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    for value in headers {
        for part in value.split(',') {
            if let Some(t) = part.trim().strip_prefix(AUTH_SUBPROTOCOL_PREFIX) {
                out.push(t.to_owned());
            }
        }
    }
    out
}

/// Resolves presented credentials (`None` items are malformed ones). Several must agree;
/// an unknown token is refused outright.
pub fn resolve_credential(presented: &[Option<String>], verifier: &Verifier) -> Credential {
    if presented.is_empty() {
        return Credential::None;
    }
    if presented
        .iter()
        .any(|t| t.as_deref().is_none_or(str::is_empty))
    {
        return Credential::Invalid(
            "malformed credential (expected \"Authorization: Bearer <token>\")",
        );
    }
    let first = presented[0].as_deref().unwrap_or_default();
    if presented.iter().any(|t| t.as_deref() != Some(first)) {
        return Credential::Invalid("conflicting credentials");
    }
    match verifier.identify(first) {
        Some(p) => Credential::Ok(p),
        None => Credential::Invalid("unknown or expired token"),
    }
}

fn agent_needs(need: ControlLevel, current: ControlLevel, what: &str) -> Refusal {
    Refusal {
        code: "forbidden",
        message: if current == ControlLevel::Off {
            format!("agent control is off on this server; restart it with --allow-control={} to allow {what}", need.as_str())
        } else {
            format!(
                "agent control level \"{}\" does not allow {what}; that needs --allow-control={}",
                current.as_str(),
                need.as_str()
            )
        },
    }
}

/// May `principal` release a gate with `action` (and an edited input when `has_input`)?
/// Only the credential and level: the content and edit gates are the hub's.
pub fn authorize_resume(
    principal: Principal,
    policy: &ControlPolicy,
    action: &str,
    has_input: bool,
) -> Option<Refusal> {
    match principal {
        Principal::Viewer => None,
        Principal::Anonymous => {
            if has_input {
                return Some(Refusal {
                    code: "edit-refused",
                    message: "input edits need a credential: open the viewer from the link `graphmind serve` prints (or its redirect file), or use `graphmind resume` with --allow-control=edit".into(),
                });
            }
            if action == "inject" {
                return Some(Refusal {
                    code: "forbidden",
                    message: "injecting a result needs a credential: open the viewer from the link `graphmind serve` prints (or its redirect file), or use `graphmind resume` with --allow-control=inject".into(),
                });
            }
            None
        }
        Principal::Agent => {
            let level = policy.agent_level;
            if has_input {
                return (level < ControlLevel::Edit)
                    .then(|| agent_needs(ControlLevel::Edit, level, "input edits"));
            }
            if action == "inject" {
                return (level < ControlLevel::Inject)
                    .then(|| agent_needs(ControlLevel::Inject, level, "injecting results"));
            }
            (level < ControlLevel::Resume)
                .then(|| agent_needs(ControlLevel::Resume, level, "resuming pauses"))
        }
    }
}

/// Breakpoints and step mode: the viewer token, or the agent token at level `resume`.
pub fn authorize_debug_state(principal: Principal, policy: &ControlPolicy) -> Option<Refusal> {
    match principal {
        Principal::Viewer => None,
        Principal::Anonymous => Some(Refusal {
            code: "forbidden",
            message: "changing breakpoints or step mode needs a credential: open the viewer from the link `graphmind serve` prints (or its redirect file)".into(),
        }),
        Principal::Agent => (policy.agent_level < ControlLevel::Resume)
            .then(|| agent_needs(ControlLevel::Resume, policy.agent_level, "changing breakpoints or step mode")),
    }
}

/// A proposed input or injected output that still carries the redaction placeholder or a
/// truncation marker is refused (defence in depth behind the viewer and the client).
pub fn content_refusal(value: &Value, is_input: bool) -> Option<Refusal> {
    let verb = if is_input {
        "edit refused"
    } else {
        "inject refused"
    };
    match proposed_value_refusal(value)? {
        RefusalCode::Placeholder => Some(Refusal {
            code: "placeholder",
            message: if is_input {
                format!("{verb}: this input contains redacted content (\"__REDACTED__\"); edit it before running")
            } else {
                format!("{verb}: this value contains redacted content (\"__REDACTED__\"); edit it before injecting")
            },
        }),
        _ => Some(Refusal { code: "truncated", message: format!("{verb}: this value contains a truncated preview of a recorded value; send the full value") }),
    }
}

/// The optional `operator` label: letters, marks, numbers, punctuation, symbols and single
/// spaces; controls, bidi and zero-width characters dropped; at most 64 code points.
pub fn sanitize_operator(value: Option<&Value>) -> Option<String> {
    let s = value?.as_str()?;
    let mut out = String::new();
    let mut count = 0;
    let mut pending_space = false;
    for ch in s.chars() {
        if ch == ' '
            || ch == '\u{a0}'
            || ch == '\u{3000}'
            || ('\u{2000}'..='\u{200a}').contains(&ch)
            || ch == '\u{202f}'
            || ch == '\u{205f}'
            || ch == '\u{1680}'
        {
            pending_space = !out.is_empty();
            continue;
        }
        if ch.is_control() || is_format_char(ch) || ch.is_whitespace() {
            continue;
        }
        if pending_space {
            if count + 1 >= MAX_OPERATOR_CHARS {
                break;
            }
            out.push(' ');
            count += 1;
            pending_space = false;
        }
        if count >= MAX_OPERATOR_CHARS {
            break;
        }
        out.push(ch);
        count += 1;
    }
    (!out.is_empty()).then_some(out)
}

/// Unicode "format" characters that must never reach a terminal: bidi controls,
/// zero-width characters, the BOM, and similar.
fn is_format_char(ch: char) -> bool {
    matches!(ch, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0001}' | '\u{e0020}'..='\u{e007f}')
        || ('\u{2028}'..='\u{2029}').contains(&ch)
        || ('\u{e000}'..='\u{f8ff}').contains(&ch)
}

/// A resumer's `requestId` is kept only when short and plain (`[A-Za-z0-9._:-]{1,128}`).
pub fn acceptable_request_id(value: Option<&Value>) -> Option<&str> {
    let s = value?.as_str()?;
    (!s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-')))
    .then_some(s)
}

// -- run files ---------------------------------------------------------------------------

/// `$GRAPHMIND_HOME/run`.
pub fn run_dir(home: &Path) -> PathBuf {
    home.join("run")
}

/// `serve-<port>.json`.
pub fn credential_path(home: &Path, port: u16) -> PathBuf {
    run_dir(home).join(format!("serve-{port}.json"))
}

/// `open-<port>.html`.
pub fn opener_path(home: &Path, port: u16) -> PathBuf {
    run_dir(home).join(format!("open-{port}.html"))
}

#[cfg(unix)]
fn owned_by_me(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.uid() == current_uid()
}

#[cfg(unix)]
fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Creates (or tightens) a private folder: refuses a symlink, a non-folder, or a folder
/// owned by another user; sets mode 0700.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(DIR_MODE);
    }
    b.create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if !owned_by_me(&meta) {
            return Err(std::io::Error::other(format!(
                "{} is owned by another user",
                dir.display()
            )));
        }
        if meta.permissions().mode() & 0o777 != DIR_MODE {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
        }
    }
    Ok(())
}

/// Writes `content` with mode 0600 atomically: a fresh temp file created exclusively
/// (never following a planted file or symlink), written, renamed over `path`.
pub fn write_private_file(path: &Path, content: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!(
        "{}.{}.tmp",
        std::process::id(),
        &crate::util::new_token()[..8]
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    let result = (|| {
        let mut f = opts.open(&tmp)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
        }
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The redirect page: a script first, a meta refresh and a link as fallbacks.
pub fn opener_html(target: &str) -> String {
    let attr = escape_html(target);
    let script_target = js(target).replace('<', "\\u003c");
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"referrer\" content=\"no-referrer\">\n<meta http-equiv=\"refresh\" content=\"0;url={attr}\">\n<title>Opening GraphMind</title>\n<script>location.replace({script_target});</script>\n</head>\n<body>\n<p><a href=\"{attr}\" rel=\"noreferrer\">Open GraphMind</a></p>\n</body>\n</html>\n"
    )
}

/// The viewer link carrying `token` (in the fragment, which no request carries), opened on
/// `run` when given.
pub fn viewer_url(url: &str, token: &str, run: Option<&str>) -> String {
    match run {
        Some(r) => format!("{url}/#token={token}&/run/{r}"),
        None => format!("{url}/#token={token}"),
    }
}

/// The run files of one server; removed on [`RunFiles::remove`] if still ours.
#[derive(Clone, Debug)]
pub struct RunFiles {
    /// `serve-<port>.json`.
    pub credential_path: PathBuf,
    /// `open-<port>.html`.
    pub opener_path: PathBuf,
    agent: String,
    viewer: String,
}

/// Writes both run files for a server on `port`.
pub fn write_run_files(
    home: &Path,
    port: u16,
    url: &str,
    tokens: &Tokens,
    version: &str,
) -> std::io::Result<RunFiles> {
    ensure_private_dir(home)?;
    ensure_private_dir(&run_dir(home))?;
    let credential_path = credential_path(home, port);
    let opener_path = opener_path(home, port);
    let content = format!(
        "{{\n  \"port\": {port},\n  \"pid\": {},\n  \"url\": {},\n  \"agentToken\": {},\n  \"version\": {}\n}}\n",
        std::process::id(),
        js(url),
        js(&tokens.agent),
        js(version)
    );
    write_private_file(&credential_path, &content)?;
    write_private_file(
        &opener_path,
        &opener_html(&viewer_url(url, &tokens.viewer, None)),
    )?;
    Ok(RunFiles {
        credential_path,
        opener_path,
        agent: tokens.agent.clone(),
        viewer: tokens.viewer.clone(),
    })
}

impl RunFiles {
    /// Deletes both files if they still hold this server's tokens (a newer server on the
    /// same port after a crash of this one has written its own, which must survive).
    pub fn remove(&self) {
        for (path, marker) in [
            (&self.credential_path, &self.agent),
            (&self.opener_path, &self.viewer),
        ] {
            if std::fs::read_to_string(path)
                .map(|t| t.contains(marker.as_str()))
                .unwrap_or(false)
            {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// What `serve-<port>.json` told the CLI.
#[derive(Debug, Clone)]
pub struct RunFile {
    /// The file read.
    pub path: PathBuf,
    /// The agent token.
    pub agent_token: String,
}

/// Why the run file could not be used.
#[derive(Debug, Clone)]
pub struct RunFileError {
    /// The file.
    pub path: PathBuf,
    /// Human text.
    pub message: String,
}

/// Refuses a file that is not ours alone: not a regular file, owned by another user, or
/// readable by others.
fn check_private(path: &Path) -> Result<(), String> {
    let meta =
        std::fs::symlink_metadata(path).map_err(|_| format!("no file at {}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if !owned_by_me(&meta) || meta.permissions().mode() & 0o077 != 0 {
            return Err(format!("{} is readable by other users or owned by someone else; delete it and restart graphmind serve", path.display()));
        }
    }
    Ok(())
}

/// The viewer link (with its token) of the server on `port`, read from its redirect file
/// `open-<port>.html` for `graphmind open` and `graphmind demo`. The viewer token never goes
/// in `serve-<port>.json`, the file the agent's commands read.
pub fn read_viewer_url(home: &Path, port: u16) -> Result<String, RunFileError> {
    let path = opener_path(home, port);
    let err = |message: String| RunFileError {
        path: path.clone(),
        message,
    };
    check_private(&path).map_err(err)?;
    let html = std::fs::read_to_string(&path)
        .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
    let quoted = html
        .split_once("location.replace(")
        .and_then(|(_, rest)| rest.split_once(");</script>"))
        .map(|(q, _)| q)
        .ok_or_else(|| {
            err(format!(
                "{} is not a GraphMind redirect file",
                path.display()
            ))
        })?;
    match json::parse_str(quoted) {
        Ok(Value::String(s)) => s.as_str().map(str::to_owned).ok_or_else(|| {
            err(format!(
                "{} is not a GraphMind redirect file",
                path.display()
            ))
        }),
        _ => Err(err(format!(
            "{} is not a GraphMind redirect file",
            path.display()
        ))),
    }
}

/// Reads `serve-<port>.json`, refusing a file another user owns or others can read.
pub fn read_run_file(home: &Path, port: u16) -> Result<RunFile, RunFileError> {
    let path = credential_path(home, port);
    let err = |message: String| RunFileError {
        path: path.clone(),
        message,
    };
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(_) => {
            return Err(err(format!(
            "no credential file at {} — is `graphmind serve` running on port {port} as this user?",
            path.display()
        )))
        }
    };
    if !meta.is_file() {
        return Err(err(format!("{} is not a regular file", path.display())));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if !owned_by_me(&meta) || meta.permissions().mode() & 0o077 != 0 {
            return Err(err(format!(
                "{} is readable by other users or owned by someone else; delete it and restart graphmind serve",
                path.display()
            )));
        }
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
    let v = json::parse_str(&text).map_err(|_| {
        err(format!(
            "{} is not a GraphMind credential file",
            path.display()
        ))
    })?;
    match (
        v.get("agentToken").and_then(Value::as_str),
        v.get("port").and_then(Value::as_f64),
    ) {
        (Some(t), Some(_)) => Ok(RunFile {
            path: path.clone(),
            agent_token: t.to_owned(),
        }),
        _ => Err(err(format!(
            "{} is not a GraphMind credential file",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_verifier() {
        let t = Tokens::generate().unwrap();
        assert!(t.viewer.starts_with("gmv_") && t.viewer.len() == 36);
        assert!(t.agent.starts_with("gma_") && t.agent.len() == 36);
        assert_ne!(t.viewer[4..], t.agent[4..]);
        let v = Verifier::new(&t);
        assert_eq!(v.identify(&t.viewer), Some(Principal::Viewer));
        assert_eq!(v.identify(&t.agent), Some(Principal::Agent));
        assert_eq!(v.identify("gmv_0"), None);
        let ok = |s: &str| Some(s.to_owned());
        assert_eq!(resolve_credential(&[], &v), Credential::None);
        assert_eq!(
            resolve_credential(&[ok(&t.agent)], &v),
            Credential::Ok(Principal::Agent)
        );
        assert!(matches!(
            resolve_credential(&[None], &v),
            Credential::Invalid(_)
        ));
        assert_eq!(
            resolve_credential(&[ok(&t.agent), ok(&t.viewer)], &v),
            Credential::Invalid("conflicting credentials")
        );
        assert_eq!(
            resolve_credential(&[ok("nope")], &v),
            Credential::Invalid("unknown or expired token")
        );
    }

    #[test]
    fn bearer_and_subprotocols() {
        assert_eq!(bearer_token(None), None);
        assert_eq!(bearer_token(Some("  ")), None);
        assert_eq!(bearer_token(Some("Bearer abc")), Some(Some("abc".into())));
        assert_eq!(
            bearer_token(Some("bearer \tabc  ")),
            Some(Some("abc".into()))
        );
        assert_eq!(bearer_token(Some("Basic abc")), Some(None));
        assert_eq!(bearer_token(Some("Bearer a b")), Some(None));
        assert_eq!(bearer_token(Some("Bearer")), Some(None));
        assert_eq!(
            subprotocol_tokens(["graphmind.v1, gm.auth.x1", "gm.auth.y"].into_iter()),
            vec!["x1", "y"]
        );
    }

    #[test]
    fn authorization_matrix() {
        let p = |level| ControlPolicy {
            agent_level: level,
            edit_input: true,
        };
        use ControlLevel::*;
        use Principal::*;
        assert!(authorize_resume(Viewer, &p(Off), "inject", true).is_none());
        assert!(authorize_resume(Anonymous, &p(Edit), "continue", false).is_none());
        assert_eq!(
            authorize_resume(Anonymous, &p(Edit), "inject", false)
                .unwrap()
                .code,
            "forbidden"
        );
        assert_eq!(
            authorize_resume(Anonymous, &p(Edit), "continue", true)
                .unwrap()
                .code,
            "edit-refused"
        );
        assert!(authorize_resume(Agent, &p(Off), "continue", false)
            .unwrap()
            .message
            .contains("--allow-control=resume"));
        assert!(authorize_resume(Agent, &p(Resume), "abort", false).is_none());
        assert!(authorize_resume(Agent, &p(Resume), "inject", false)
            .unwrap()
            .message
            .contains("does not allow injecting"));
        assert!(authorize_resume(Agent, &p(Inject), "inject", false).is_none());
        assert!(authorize_resume(Agent, &p(Inject), "continue", true).is_some());
        assert!(authorize_resume(Agent, &p(Edit), "continue", true).is_none());
        assert!(authorize_debug_state(Anonymous, &p(Edit)).is_some());
        assert!(authorize_debug_state(Agent, &p(Off)).is_some());
        assert!(authorize_debug_state(Agent, &p(Resume)).is_none());
        assert!(authorize_debug_state(Viewer, &p(Off)).is_none());
    }

    #[test]
    fn operator_and_request_ids() {
        let s = |x: &str| sanitize_operator(Some(&Value::from(x)));
        assert_eq!(s("  claude   code\u{202e}\n"), Some("claude code".into()));
        assert_eq!(s("\u{200b}"), None);
        assert_eq!(s(&"x".repeat(100)).map(|o| o.chars().count()), Some(64));
        assert_eq!(
            acceptable_request_id(Some(&Value::from("req-1:a.b_c"))),
            Some("req-1:a.b_c")
        );
        assert_eq!(acceptable_request_id(Some(&Value::from("a b"))), None);
        assert_eq!(acceptable_request_id(Some(&Value::from(""))), None);
    }

    #[test]
    fn run_files_are_private_and_removed() {
        let home = std::env::temp_dir().join(format!("gm-tokens-{}", crate::util::new_token()));
        let t = Tokens::generate().unwrap();
        let files = write_run_files(&home, 4999, "http://127.0.0.1:4999", &t, "0.0.0").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&run_dir(&home)), 0o700);
            assert_eq!(mode(&files.credential_path), 0o600);
            assert_eq!(mode(&files.opener_path), 0o600);
        }
        let read = read_run_file(&home, 4999).unwrap();
        assert_eq!(read.agent_token, t.agent);
        assert_eq!(
            read_viewer_url(&home, 4999).unwrap(),
            format!("http://127.0.0.1:4999/#token={}", t.viewer)
        );
        assert!(std::fs::read_to_string(&files.opener_path)
            .unwrap()
            .contains(&format!("#token={}", t.viewer)));
        files.remove();
        assert!(!files.credential_path.exists() && !files.opener_path.exists());
        assert!(read_run_file(&home, 4999)
            .unwrap_err()
            .message
            .contains("no credential file"));
        let _ = std::fs::remove_dir_all(home);
    }
}
