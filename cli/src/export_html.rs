//! `graphmind record RUN_ID --html`: one self-contained HTML page holding the built viewer
//! (its JavaScript and CSS inlined) and one recorded run, readable offline.
//!
//! The page is the viewer's own `index.html`, rewritten: every `<script src>` and
//! `<link rel=stylesheet>` it names is replaced by the file's contents inline, a
//! Content-Security-Policy `<meta>` forbids loading anything from anywhere (no fetch, no
//! socket, no script or style file, no frame), and the run travels in
//! `<script type="application/json" id="graphmind-run">` as `{"run": RunInfo, "events":
//! [envelope, ...]}`. The viewer finds that element at start and opens the run read-only
//! (docs/viewer.md, *Exported runs*). A build that references anything a single page
//! cannot carry (a remote URL, a lazily loaded chunk) is an error, never a page that
//! would reach the network when opened.
//!
//! The run is the same redacted (or, with `--no-redact-secrets`, verbatim) envelope list
//! that NDJSON export writes; see [`crate::export`].

use crate::http;

/// The `id` of the element carrying the run (the viewer reads it).
pub const RUN_ELEMENT_ID: &str = "graphmind-run";

/// The page's Content-Security-Policy: inline script and style only, images and fonts
/// only from `data:` URLs, and no network of any kind.
pub const EXPORT_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:; connect-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'";

/// JSON text made safe inside a `<script>` element: `<`, `>` and `&` (which only occur in
/// JSON strings) become `\u003c`, `\u003e`, `\u0026`, so no `</script>` or `<!--` can end
/// or confuse the element; U+2028/U+2029 are escaped too. `JSON.parse` reads the same value.
pub fn script_safe_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            _ => out.push(c),
        }
    }
    out
}

/// Text escaped for an HTML text node or a quoted attribute.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Replaces every case-insensitive occurrence of `needle` (ASCII) in `hay` by `with`.
fn replace_ci(hay: &str, needle: &str, with: &str) -> String {
    let lower = hay.to_ascii_lowercase();
    let mut out = String::with_capacity(hay.len());
    let mut last = 0;
    let mut from = 0;
    while let Some(at) = lower[from..].find(needle) {
        let at = from + at;
        out.push_str(&hay[last..at]);
        out.push_str(with);
        last = at + needle.len();
        from = last;
    }
    out.push_str(&hay[last..]);
    out
}

/// A script bundle made safe to inline: `</script` and `<!--` (which can only occur
/// inside a string, template, regular expression or comment of a module) are written
/// `\x3C/script` and `\x3C!--`, the same text for the JavaScript parser and nothing the
/// HTML parser reacts to.
fn inline_js(js: &str) -> String {
    replace_ci(
        &replace_ci(js, "</script", "\\x3C/script"),
        "<!--",
        "\\x3C!--",
    )
}

/// A stylesheet made safe to inline: `</style` (only possible in a CSS string or comment)
/// becomes `\3c/style`.
fn inline_css(css: &str) -> String {
    replace_ci(css, "</style", "\\3c/style")
}

/// A tag's attributes: lower-cased names with their values (`None` for a bare attribute).
type Attrs = Vec<(String, Option<String>)>;

/// One start tag found in the page.
#[derive(Debug)]
struct Tag {
    /// Byte offset of `<`.
    start: usize,
    /// Byte offset just after `>`.
    end: usize,
    /// Its attributes.
    attrs: Attrs,
}

impl Tag {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }
}

/// The next start tag named `name` (lower-case) at or after `from`.
fn find_tag(html: &str, lower: &str, name: &str, from: usize) -> Option<Tag> {
    let pat = format!("<{name}");
    let mut at = from;
    loop {
        let start = at + lower[at..].find(&pat)?;
        let after = start + pat.len();
        let next = lower.as_bytes().get(after).copied();
        if !matches!(next, Some(b' ' | b'\t' | b'\n' | b'\r' | b'/' | b'>')) {
            at = after;
            continue;
        }
        let (attrs, end) = parse_attrs(html, after)?;
        return Some(Tag { start, end, attrs });
    }
}

/// Attributes from `i` up to the tag's `>`; returns them and the offset after `>`.
fn parse_attrs(html: &str, mut i: usize) -> Option<(Attrs, usize)> {
    let b = html.as_bytes();
    let mut attrs = Vec::new();
    loop {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        if b[i] == b'>' {
            return Some((attrs, i + 1));
        }
        let name_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && !matches!(b[i], b'=' | b'>' | b'/') {
            i += 1;
        }
        let name = html[name_start..i].to_ascii_lowercase();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let value = if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                let ve = vs + html[vs..].bytes().position(|c| c == q)?;
                i = ve + 1;
                &html[vs..ve]
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                    i += 1;
                }
                &html[vs..i]
            };
            attrs.push((name, Some(value.to_owned())));
        } else {
            attrs.push((name, None));
        }
    }
}

/// The bundle-relative path a reference in `index.html` names, or an error for anything
/// that is not a file inside the build (a URL with a scheme, `//host`, `..`).
fn local_ref(reference: &str) -> Result<String, String> {
    let r = reference.split(['?', '#']).next().unwrap_or("");
    let has_scheme = r.find(':').is_some_and(|c| {
        r[..c]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            && c > 0
    });
    if has_scheme || r.starts_with("//") {
        return Err(format!("the viewer build references {reference}, which is not a local file; a self-contained page cannot carry it"));
    }
    let rel = r.trim_start_matches("./").trim_start_matches('/');
    if rel.is_empty() || rel.split('/').any(|s| s == ".." || s.is_empty()) {
        return Err(format!(
            "the viewer build references {reference}, which is outside the build"
        ));
    }
    Ok(rel.to_owned())
}

fn is_data_url(v: &str) -> bool {
    v.trim_start()
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("data:"))
}

/// Builds the page from the viewer's `index.html`, a reader for the files it references
/// (bundle-relative path → contents), the run as JSON text (`{"run":…,"events":[…]}`)
/// and the page title. Pure: the caller supplies the files.
pub fn build_page(
    index_html: &str,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
    run_json: &str,
    title: &str,
) -> Result<String, String> {
    let lower = index_html.to_ascii_lowercase();
    // (start, end, replacement), in document order.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let read_text = |reference: &str| -> Result<String, String> {
        let rel = local_ref(reference)?;
        let bytes = read(&rel).ok_or_else(|| {
            format!("the viewer build references {reference}, but {rel} is not in it")
        })?;
        String::from_utf8(bytes).map_err(|_| format!("{rel} in the viewer build is not UTF-8"))
    };

    let mut scripts = 0;
    let mut at = 0;
    while let Some(tag) = find_tag(index_html, &lower, "script", at) {
        let close = lower[tag.end..]
            .find("</script")
            .map(|p| tag.end + p)
            .ok_or("the viewer's index.html has an unclosed <script>")?;
        let close_end = lower[close..]
            .find('>')
            .map(|p| close + p + 1)
            .ok_or("the viewer's index.html has an unclosed <script>")?;
        at = close_end;
        let Some(src) = tag.attr("src") else { continue };
        let js = read_text(src)?;
        let kind = tag.attr("type").unwrap_or("").to_ascii_lowercase();
        let open = if kind == "module" {
            "<script type=\"module\">"
        } else {
            "<script>"
        };
        edits.push((
            tag.start,
            close_end,
            format!("{open}{}</script>", inline_js(&js)),
        ));
        scripts += 1;
    }
    if scripts == 0 {
        return Err(
            "the viewer's index.html names no <script src>: this is not a viewer build".into(),
        );
    }

    let mut at = 0;
    while let Some(tag) = find_tag(index_html, &lower, "link", at) {
        at = tag.end;
        let rel = tag.attr("rel").unwrap_or("").to_ascii_lowercase();
        let rels: Vec<&str> = rel.split_ascii_whitespace().collect();
        let Some(href) = tag.attr("href") else {
            continue;
        };
        if rels.contains(&"stylesheet") {
            let css = read_text(href)?;
            edits.push((
                tag.start,
                tag.end,
                format!("<style>{}</style>", inline_css(&css)),
            ));
        } else if is_data_url(href) {
            // an inline icon: nothing to fetch
        } else if rels
            .iter()
            .any(|r| matches!(*r, "icon" | "apple-touch-icon" | "manifest"))
        {
            edits.push((tag.start, tag.end, String::new()));
        } else {
            return Err(format!("the viewer build links {href} (rel=\"{rel}\"), which a single page cannot carry: is the build split into chunks?"));
        }
    }

    // Other references a build could carry (an <img src>, an <iframe>) are refused too.
    for name in [
        "img", "iframe", "source", "embed", "object", "base", "video", "audio",
    ] {
        let mut at = 0;
        while let Some(tag) = find_tag(index_html, &lower, name, at) {
            at = tag.end;
            if tag.attrs.iter().any(|(k, v)| {
                matches!(k.as_str(), "src" | "href" | "data" | "srcset" | "poster")
                    && v.as_deref().is_some_and(|v| !is_data_url(v))
            }) {
                return Err(format!("the viewer's index.html has a <{name}> that loads a file; a self-contained page cannot carry it"));
            }
        }
    }

    if let Some(t) = find_tag(index_html, &lower, "title", 0) {
        if let Some(close) = lower[t.end..].find("</title>") {
            edits.push((t.end, t.end + close, escape_html(title)));
        }
    }
    let head =
        find_tag(index_html, &lower, "head", 0).ok_or("the viewer's index.html has no <head>")?;
    let head_close = lower
        .find("</head>")
        .ok_or("the viewer's index.html has no </head>")?;
    edits.push((
        head.end,
        head.end,
        format!("\n    <meta http-equiv=\"Content-Security-Policy\" content=\"{EXPORT_CSP}\" />"),
    ));
    edits.push((
        head_close,
        head_close,
        format!(
            "  <script type=\"application/json\" id=\"{RUN_ELEMENT_ID}\">{}</script>\n  ",
            script_safe_json(run_json)
        ),
    ));

    edits.sort_by_key(|e| (e.0, e.1));
    let mut out = String::with_capacity(index_html.len() + run_json.len() + 128 * 1024);
    let mut last = 0;
    for (start, end, with) in &edits {
        if *start < last {
            return Err("the viewer's index.html could not be rewritten (overlapping tags)".into());
        }
        out.push_str(&index_html[last..*start]);
        out.push_str(with);
        last = *end;
    }
    out.push_str(&index_html[last..]);
    Ok(out)
}

/// The run's JSON for the page: `{"run": RunInfo, "events": [...]}`. Lines that are not
/// JSON (never stored by this server, but a database is a file) are left out.
pub fn run_json(run_info: &str, envelopes: &[String]) -> String {
    let mut s = String::with_capacity(
        run_info.len() + envelopes.iter().map(|l| l.len() + 1).sum::<usize>() + 32,
    );
    s.push_str("{\"run\":");
    s.push_str(run_info);
    s.push_str(",\"events\":[");
    let mut first = true;
    for line in envelopes {
        if graphmind_core::json::parse_str(line).is_err() {
            continue;
        }
        if !first {
            s.push(',');
        }
        first = false;
        s.push_str(line);
    }
    s.push_str("]}");
    s
}

/// The viewer files the page is built from: `GRAPHMIND_VIEWER_DIST` when set, else the
/// build embedded in this binary. Err when neither is a viewer build.
pub fn viewer_index() -> Result<String, String> {
    let from_env = std::env::var_os(http::VIEWER_DIST_ENV).filter(|d| !d.is_empty());
    if from_env.is_none() && !http::VIEWER_BUILT {
        return Err("this binary was built without the viewer (run `make viewer`, then rebuild), and GRAPHMIND_VIEWER_DIST is not set".into());
    }
    let Some((_, bytes)) = http::static_file("/index.html") else {
        return Err(format!(
            "no viewer build at {} (index.html missing)",
            from_env
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
    };
    String::from_utf8(bytes).map_err(|_| "the viewer's index.html is not UTF-8".into())
}

/// The whole page for one run, from the viewer build this process sees.
pub fn render(run_info: &str, envelopes: &[String], title: &str) -> Result<String, String> {
    let index = viewer_index()?;
    let read = |rel: &str| http::static_file(&format!("/{rel}")).map(|(_, b)| b);
    build_page(&index, &read, &run_json(run_info, envelopes), title)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const INDEX: &str = "<!doctype html>\n<html><head>\n<meta charset=\"utf-8\" />\n<title>GraphMind</title>\n<link rel=\"icon\" href=\"data:,\" />\n<script type=\"module\" crossorigin src=\"./assets/index-a.js\"></script>\n<link rel=\"stylesheet\" crossorigin href=\"./assets/index-a.css\">\n</head><body><div id=\"bar\"></div></body></html>\n";

    fn files() -> HashMap<String, Vec<u8>> {
        let mut f = HashMap::new();
        f.insert(
            "assets/index-a.js".to_owned(),
            b"const s='</script><!-- x';globalThis.booted=1;".to_vec(),
        );
        f.insert(
            "assets/index-a.css".to_owned(),
            b"body{color:red}/*</style>*/".to_vec(),
        );
        f
    }

    fn build(index: &str, run: &str) -> Result<String, String> {
        let f = files();
        build_page(index, &|p| f.get(p).cloned(), run, "app <x> · run_1")
    }

    #[test]
    fn inlines_the_bundle_and_the_run() {
        let page = build(
            INDEX,
            r#"{"run":{"id":"r"},"events":[{"payload":{"out":"</script><img src=x>&"}}]}"#,
        )
        .unwrap();
        assert!(page.contains("<script type=\"module\">const s='\\x3C/script>\\x3C!-- x';globalThis.booted=1;</script>"), "{page}");
        assert!(page.contains("<style>body{color:red}/*\\3c/style>*/</style>"));
        assert!(page.contains(r#"<script type="application/json" id="graphmind-run">{"run":{"id":"r"},"events":[{"payload":{"out":"\u003c/script\u003e\u003cimg src=x\u003e\u0026"}}]}</script>"#), "{page}");
        assert!(page.contains("Content-Security-Policy"));
        assert!(page.contains("<title>app &lt;x&gt; · run_1</title>"));
        assert!(!page.contains("src=\"./") && !page.contains("href=\"./"));
        assert!(
            page.contains("<body><div id=\"bar\"></div></body>"),
            "the viewer's DOM stays"
        );
        // exactly one </script> per script element: nothing in the data closes one early
        assert_eq!(page.matches("</script>").count(), 2);
    }

    #[test]
    fn refuses_what_a_single_page_cannot_carry() {
        let remote = INDEX.replace("./assets/index-a.css", "https://cdn.example/x.css");
        assert!(build(&remote, "{}")
            .unwrap_err()
            .contains("not a local file"));
        let chunk = INDEX.replace(
            "</head>",
            "<link rel=\"modulepreload\" href=\"./assets/chunk.js\"></head>",
        );
        assert!(build(&chunk, "{}").unwrap_err().contains("chunks"));
        let missing = INDEX.replace("index-a.js", "index-b.js");
        assert!(build(&missing, "{}").unwrap_err().contains("not in it"));
        let outside = INDEX.replace("./assets/index-a.js", "../secret.js");
        assert!(build(&outside, "{}").unwrap_err().contains("outside"));
        assert!(build("<html><head></head><body></body></html>", "{}")
            .unwrap_err()
            .contains("no <script src>"));
        let img = INDEX.replace("<body>", "<body><img src=\"./logo.png\">");
        assert!(build(&img, "{}").is_err());
    }

    #[test]
    fn run_json_and_escaping() {
        assert_eq!(
            run_json(
                r#"{"id":"r"}"#,
                &["{\"a\":1}".into(), "not json".into(), "{\"b\":2}".into()]
            ),
            r#"{"run":{"id":"r"},"events":[{"a":1},{"b":2}]}"#
        );
        assert_eq!(
            script_safe_json("\"a<b>&\u{2028}\""),
            "\"a\\u003cb\\u003e\\u0026\\u2028\""
        );
        assert_eq!(replace_ci("a</SCRIPT>b</script", "</script", "X"), "aX>bX");
        assert_eq!(local_ref("./assets/a.js?v=1").unwrap(), "assets/a.js");
        assert_eq!(local_ref("/assets/a.js").unwrap(), "assets/a.js");
        assert!(local_ref("//cdn/x.js").is_err() && local_ref("http://x/y.js").is_err());
    }
}
