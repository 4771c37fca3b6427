//! The operator console: one page of hand-written HTML, CSS and JavaScript,
//! embedded in the binary and served at `/` on the metrics listener.
//!
//! It reads only the JSON API (`/v1/groups`, `/v1/groups/{id}`) and polls it,
//! so it shows exactly what the API shows, needs no build step and no
//! internet, and adds nothing to the daemon but these constant strings.
//! Charts are SVG drawn by the script.

/// A static file of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    pub content_type: &'static str,
    pub body: &'static str,
}

const INDEX: Asset = Asset { content_type: "text/html; charset=utf-8", body: include_str!("console/index.html") };
const SCRIPT: Asset =
    Asset { content_type: "application/javascript; charset=utf-8", body: include_str!("console/console.js") };
const STYLE: Asset = Asset { content_type: "text/css; charset=utf-8", body: include_str!("console/console.css") };

/// The console file served at `path`, if any.
pub fn asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(INDEX),
        "/console.js" => Some(SCRIPT),
        "/console.css" => Some(STYLE),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_its_script_and_style_from_the_daemon_only() {
        let page = asset("/").expect("index");
        assert!(page.body.contains("src=\"/console.js\""));
        assert!(page.body.contains("href=\"/console.css\""));
        for a in [INDEX, SCRIPT, STYLE] {
            // The SVG namespace is a name, not a download.
            let rest = a.body.replace("\"http://www.w3.org/2000/svg\"", "");
            assert!(!rest.contains("http://") && !rest.contains("https://"), "no external resources");
            assert!(!rest.contains("//cdn") && !rest.contains("url("), "no external resources");
        }
        assert_eq!(asset("/v1/groups"), None);
    }
}
