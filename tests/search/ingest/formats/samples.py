"""Small real documents built in memory for the format tests: DOCX and EPUB packages written with zipfile, the
way Word and EPUB writers lay them out, and a PDF typeset by reportlab."""
from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

_CONTENT_TYPES = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/'
                  '2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>')
_STYLES = (f'<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="{W}">'
           '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>'
           '<w:style w:type="paragraph" w:styleId="Berschrift2"><w:name w:val="heading 2"/></w:style>'
           '<w:style w:type="paragraph" w:styleId="Normal"><w:name w:val="Normal"/></w:style></w:styles>')


def docx_bytes(paragraphs: list[tuple[str, str]], *, table: list[list[str]] | None = None) -> bytes:
    """A Word document: (style id, text) paragraphs ("" for body text), then an optional table."""
    def para(style: str, text: str) -> str:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        return f"<w:p>{props}<w:r><w:t>{escape(text)}</w:t></w:r></w:p>"

    body = "".join(para(style, text) for style, text in paragraphs)
    if table:
        body += "<w:tbl>" + "".join(
            "<w:tr>" + "".join(f"<w:tc><w:p><w:r><w:t>{escape(c)}</w:t></w:r></w:p></w:tc>" for c in row) + "</w:tr>"
            for row in table) + "</w:tbl>"
    document = f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES)
        zf.writestr("word/styles.xml", _STYLES)
        zf.writestr("word/document.xml", document)
    return out.getvalue()


def epub_bytes(chapters: list[tuple[str, str]], *, title: str = "A Small Book") -> bytes:
    """An EPUB 3: (file name, XHTML body) chapters listed in the spine in the given order; the manifest lists them
    in reverse, so a reader that followed the manifest would read them backwards."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first and stored, as OCF asks
        zf.writestr("META-INF/container.xml",
                    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                    'container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/'
                    'oebps-package+xml"/></rootfiles></container>')
        items = "".join(f'<item id="c{i}" href="{name}" media-type="application/xhtml+xml"/>'
                        for i, (name, _body) in reversed(list(enumerate(chapters))))
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        zf.writestr("OEBPS/content.opf",
                    '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                    f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{escape(title)}</dc:title>'
                    f'</metadata><manifest>{items}</manifest><spine>{spine}</spine></package>', zipfile.ZIP_DEFLATED)
        for name, body in chapters:
            zf.writestr(f"OEBPS/{name}", '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/'
                        f'xhtml"><head><title>{escape(name)}</title></head><body>{body}</body></html>',
                        zipfile.ZIP_DEFLATED)
    return out.getvalue()


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF typeset by reportlab, one list of lines per page (a line starting with '# ' is set large)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4)
    for lines in pages:
        y = 780
        for line in lines:
            heading = line.startswith("# ")
            pdf.setFont("Helvetica-Bold" if heading else "Helvetica", 18 if heading else 11)
            pdf.drawString(72, y, line[2:] if heading else line)
            y -= 28 if heading else 16
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def pdf_drawn(draw: Callable[[Any], None]) -> bytes:
    """A PDF of one A4 canvas that `draw` sets as a test needs it (fonts, positions, several pages)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4)
    draw(pdf)
    pdf.save()
    return out.getvalue()
