//! `plot -o FILE.png`: the SVG chart `plot.rs` draws, rasterized at its own size (resvg, pure
//! Rust), so a PNG is the same chart pixel for pixel wherever it is viewed.
//!
//! Owns: SVG → PNG, and choosing a font for the chart's text. Must not touch: the chart's layout
//! (`plot.rs`). The text is drawn with the system's fonts: the chart asks for Helvetica, Arial or
//! any sans-serif, and the generic family is pointed at a sans-serif face that is installed.

use resvg::{tiny_skia, usvg};

/// Sans-serif families tried for the chart's generic `sans-serif`, in order; any installed face
/// is the last resort.
const SANS_SERIF: [&str; 5] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Cantarell",
];

/// The PNG image of `svg`.
///
/// # Errors
/// No font is installed to draw the text with, or the SVG cannot be read (a bug in `plot.rs`).
pub fn png(svg: &str) -> Result<Vec<u8>, String> {
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    let family = SANS_SERIF
        .iter()
        .find(|wanted| {
            fonts
                .faces()
                .any(|face| face.families.iter().any(|(name, _)| name == *wanted))
        })
        .map(|name| (*name).to_owned())
        .or_else(|| {
            fonts
                .faces()
                .find_map(|face| face.families.first().map(|(name, _)| name.clone()))
        })
        .ok_or("no fonts installed to draw the chart's text (Debian: apt-get install fonts-dejavu-core), or write .svg")?;
    fonts.set_sans_serif_family(family);
    let tree = usvg::Tree::from_str(svg, &options)
        .map_err(|error| format!("cannot read the chart's SVG: {error}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or("the chart has no area to draw")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|error| format!("cannot encode the PNG: {error}"))
}
