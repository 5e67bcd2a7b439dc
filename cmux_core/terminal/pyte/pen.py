"""The pen of the pyte backend's screen: the style new cells are drawn with.

:class:`Pen` turns SGR parameter strings (``;`` parameters and ``:``
sub-parameters) into one SGR parameter string per style, the form cells store;
the screen caches its results per (pen, parameters).
"""

from __future__ import annotations

# Pen attribute bits: the SGR code each renders as, and the codes that set or clear them.
_SGR_FLAGS = ((1, "1"), (2, "2"), (4, "3"), (8, "4"), (16, "5"), (32, "7"), (64, "8"), (128, "9"))
_SGR_SET = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16, 6: 16, 7: 32, 8: 64, 9: 128, 21: 8}
_SGR_CLEAR = {22: 1 | 2, 23: 4, 24: 8, 25: 16, 27: 32, 28: 64, 29: 128}


class Pen:
    """The graphic rendition new cells are drawn with, as SGR sequences change it.

    ``flags`` holds attribute bits (bold, italic, ...); ``fg`` and ``bg`` hold the
    SGR parameters that chose each colour ("31", "38;5;208", "48;2;1;2;3"), empty
    for the default colour. Underline colours (58) are parsed and dropped.
    """

    __slots__ = ("bg", "fg", "flags")

    def __init__(self) -> None:
        self.flags = 0
        self.fg = ""
        self.bg = ""

    def reset(self) -> None:
        self.flags, self.fg, self.bg = 0, "", ""

    def style(self) -> str:
        """The pen as one SGR parameter string ("1;3;38;5;208"); empty for the default pen."""
        parts = [code for bit, code in _SGR_FLAGS if self.flags & bit]
        parts += [colour for colour in (self.fg, self.bg) if colour]
        return ";".join(parts)

    def apply(self, params: str) -> None:
        """Apply one SGR sequence's parameters; codes the pen does not keep are skipped."""
        parts = params.split(";")
        i, n = 0, len(parts)
        while i < n:
            part = parts[i]
            i += 1
            if ":" in part:
                self._apply_sub(part.split(":"))
                continue
            code = int(part) if part.isdigit() else 0
            if code in (38, 48, 58):
                mode = parts[i] if i < n else ""
                if mode == "5":
                    colour = _palette_colour(code, parts[i + 1 : i + 2])
                    i += 2
                elif mode == "2":
                    colour = _rgb_colour(code, parts[i + 1 : i + 4])
                    i += 4
                else:
                    colour = None
                    i += 1
                self._set_colour(code, colour)
            else:
                self._apply_code(code)

    def _apply_sub(self, subs: list[str]) -> None:
        code = int(subs[0]) if subs[0].isdigit() else -1
        if code in (38, 48, 58):
            mode = subs[1] if len(subs) > 1 else ""
            if mode == "5":
                self._set_colour(code, _palette_colour(code, subs[2:3]))
            elif mode == "2":
                # 38:2:<colour space>:r:g:b, or the common 38:2:r:g:b without it
                rgb = subs[3:6] if len(subs) >= 6 else subs[2:5]
                self._set_colour(code, _rgb_colour(code, rgb))
        elif code == 4:
            style = subs[1] if len(subs) > 1 else "1"
            if style in ("", "0"):
                self.flags &= ~8
            else:
                self.flags |= 8
        elif code >= 0:
            self._apply_code(code)

    def _apply_code(self, code: int) -> None:
        if code == 0:
            self.reset()
        elif code in _SGR_SET:
            self.flags |= _SGR_SET[code]
        elif code in _SGR_CLEAR:
            self.flags &= ~_SGR_CLEAR[code]
        elif 30 <= code <= 37 or 90 <= code <= 97:
            self.fg = str(code)
        elif code == 39:
            self.fg = ""
        elif 40 <= code <= 47 or 100 <= code <= 107:
            self.bg = str(code)
        elif code == 49:
            self.bg = ""

    def _set_colour(self, code: int, colour: str | None) -> None:
        if colour is None or code == 58:
            return
        if code == 38:
            self.fg = colour
        else:
            self.bg = colour


def _palette_colour(code: int, parts: list[str]) -> str | None:
    if not parts or not parts[0].isdigit():
        return None
    return f"{code};5;{min(int(parts[0]), 255)}"


def _rgb_colour(code: int, parts: list[str]) -> str | None:
    if len(parts) < 3:
        return None
    rgb = [min(int(p), 255) if p.isdigit() else 0 for p in parts]
    return f"{code};2;{rgb[0]};{rgb[1]};{rgb[2]}"
