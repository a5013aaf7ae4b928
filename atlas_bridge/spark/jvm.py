"""Read many values off a JVM object in one py4j round trip (the Spark hook's only JVM reads).

Every py4j call is a round trip to the JVM (~0.1 ms, more on a loaded driver), and the hook needs a dozen
values per write event (the plan's JSON, its root class, the query id, the SQL text, the save mode, a
path...). :class:`JvmReader` asks for all of them at once: each value is a *path* of zero- or one-argument
method calls from a root object (``["analyzed", "origin", "sqlText"]``), evaluated by reflection on the
JVM by a small Java class that Spark's bundled Janino compiles once per session. Scala ``Option`` values
are unwrapped on the way (``None`` ends the path with None); a failing path gives :data:`FAILED` and
leaves the other paths alone.

Where Janino cannot compile the class, the same paths are walked with one py4j call per step (the old
cost, same results). Either way :attr:`JvmReader.calls` counts the round trips made.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

logger = logging.getLogger(__name__)

__all__ = ["FAILED", "JvmReader", "Path"]

Path = list["str | tuple[str, int | str]"]
"""Method names from the root; a tuple is a method with one ``int`` or ``str`` argument."""


class _Failed:
    def __repr__(self) -> str:
        return "FAILED"


FAILED: Final = _Failed()
"""The value of a path whose evaluation threw (a missing method, a failing call)."""

_CLASS = "AtlasBridgePathReader"
# Separators that cannot occur in method names: records, steps, argument (then 'i'/'s' + value).
_REC, _STEP, _ARG = "\u001e", "\u001f", "\u001d"
_NULL, _FAIL = "\u0002", "\u0001"
_VALUE_SEP = "\u0000"

_JAVA = r"""
public class AtlasBridgePathReader {
    public String read(Object root, String paths) {
        StringBuilder out = new StringBuilder();
        String[] records = paths.split("\u001e", -1);
        for (int k = 0; k < records.length; k++) {
            if (k > 0) out.append('\u0000');
            try {
                Object v = unwrap(root);
                String[] steps = records[k].split("\u001f", -1);
                for (int i = 0; i < steps.length && v != null; i++) {
                    v = unwrap(step(v, steps[i]));
                }
                if (v == null) out.append('\u0002');
                else out.append(String.valueOf(v).replace('\u0000', ' '));
            } catch (Throwable t) {
                out.append('\u0001');
            }
        }
        return out.toString();
    }

    private static Object unwrap(Object v) throws Exception {
        if (v == null) return null;
        String name = v.getClass().getName();
        if (name.equals("scala.None$")) return null;
        if (name.equals("scala.Some")) return call(v, "get", new Class[0], new Object[0]);
        return v;
    }

    private static Object step(Object v, String s) throws Exception {
        int at = s.indexOf('\u001d');
        if (at < 0) return call(v, s, new Class[0], new Object[0]);
        String name = s.substring(0, at);
        char kind = s.charAt(at + 1);
        String arg = s.substring(at + 2);
        if (kind == 'i') {
            Object[] args = new Object[] {Integer.valueOf(Integer.parseInt(arg))};
            return call(v, name, new Class[] {Integer.TYPE}, args);
        }
        return call(v, name, new Class[] {Object.class}, new Object[] {arg});
    }

    private static Object call(Object v, String name, Class[] types, Object[] args) throws Exception {
        java.lang.reflect.Method m = find(v.getClass(), name, types);
        if (m == null) throw new NoSuchMethodException(name);
        return m.invoke(v, args);
    }

    /** A public method of a public class or interface (reflection on a private class's method fails). */
    private static java.lang.reflect.Method find(Class c, String name, Class[] types) {
        for (Class k = c; k != null; k = k.getSuperclass()) {
            java.lang.reflect.Method m = declared(k, name, types);
            if (m != null) return m;
            Class[] ifaces = k.getInterfaces();
            for (int i = 0; i < ifaces.length; i++) {
                m = find(ifaces[i], name, types);
                if (m != null) return m;
            }
        }
        return null;
    }

    private static java.lang.reflect.Method declared(Class k, String name, Class[] types) {
        if (!java.lang.reflect.Modifier.isPublic(k.getModifiers())) return null;
        java.lang.reflect.Method[] ms = k.getMethods();
        for (int i = 0; i < ms.length; i++) {
            java.lang.reflect.Method m = ms[i];
            if (!m.getName().equals(name) || m.getParameterCount() != types.length) continue;
            if (types.length == 1) {
                Class p = m.getParameterTypes()[0];
                boolean text = types[0] == Object.class && p.isAssignableFrom(String.class);
                if (!p.equals(types[0]) && !text) continue;
            }
            if (java.lang.reflect.Modifier.isPublic(m.getDeclaringClass().getModifiers())) return m;
        }
        return null;
    }
}
"""

_compiled: dict[int, Any] = {}
_compile_lock = threading.Lock()


def _compile(jvm: Any) -> Any | None:
    """An instance of the Java reader in this JVM (compiled once per gateway), or None."""
    with _compile_lock:
        key = id(jvm)
        if key in _compiled:
            return _compiled[key]
        instance = None
        try:
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.cook(_JAVA)
            instance = compiler.getClassLoader().loadClass(_CLASS).newInstance()
        except Exception as e:  # no Janino on this Spark, or it refused the source
            msg = "atlas-bridge: JVM path reader unavailable (%s); reading with one py4j call per value"
            logger.info(msg, e)
        _compiled[key] = instance
        return instance


def _encode(paths: list[Path]) -> str:
    records = []
    for path in paths:
        steps = []
        for s in path:
            if isinstance(s, tuple):
                name, arg = s
                steps.append(f"{name}{_ARG}{'i' if isinstance(arg, int) else 's'}{arg}")
            else:
                steps.append(s)
        records.append(_STEP.join(steps))
    return _REC.join(records)


class JvmReader:
    """Evaluates paths of method calls on JVM objects; one round trip per :meth:`read` where it can."""

    def __init__(self, jvm: Any, *, use_java: bool = True) -> None:
        self._java = _compile(jvm) if use_java else None
        self.calls = 0
        """py4j round trips made by this reader (all threads)."""
        self._lock = threading.Lock()

    @property
    def batched(self) -> bool:
        """Whether reads are one round trip each (the Java reader compiled)."""
        return self._java is not None

    def _count(self, n: int) -> None:
        with self._lock:
            self.calls += n

    def read(self, root: Any, paths: list[Path]) -> tuple[list[str | _Failed | None], int]:
        """The value of each path as text (None for a null or ``None``), and the round trips it took."""
        if not paths:
            return [], 0
        if self._java is not None:
            self._count(1)
            text = str(self._java.read(root, _encode(paths)))
            values: list[str | _Failed | None] = []
            for part in text.split(_VALUE_SEP):
                values.append(None if part == _NULL else FAILED if part == _FAIL else part)
            if len(values) != len(paths):
                return [FAILED] * len(paths), 1
            return values, 1
        total = 0
        out: list[str | _Failed | None] = []
        for path in paths:
            value, n = self._walk(root, path)
            total += n
            out.append(value)
        self._count(total)
        return out, total

    @staticmethod
    def _walk(root: Any, path: Path) -> tuple[str | _Failed | None, int]:
        """The fallback: one py4j call per step, plus two to tell a Scala ``Option`` by its class."""
        n = 0
        v: Any = root
        try:
            for s in path:
                name, args = (s[0], (s[1],)) if isinstance(s, tuple) else (s, ())
                n += 1
                v = getattr(v, name)(*args)
                if v is None:
                    return None, n
                if isinstance(v, (str, int, float, bool)):
                    continue
                n += 2
                cls = str(v.getClass().getName())
                if cls == "scala.None$":
                    return None, n
                if cls == "scala.Some":
                    n += 1
                    v = v.get()
                    if v is None:
                        return None, n
            if isinstance(v, bool):
                return ("true" if v else "false"), n
            if not isinstance(v, (str, int, float)):
                n += 1
                v = v.toString()
            return str(v).replace("\u0000", " "), n
        except Exception:
            return FAILED, n


def split_table_name(name: str) -> dict[str, Any]:
    """``cat.db.t`` (backquotes stripped) -> a TableIdentifier-like dict, as Spark's plan JSON has it."""
    parts = [p.strip("`") for p in name.split(".") if p]
    out: dict[str, Any] = {"table": parts[-1] if parts else name}
    if len(parts) >= 2:
        out["database"] = parts[-2]
    if len(parts) >= 3:
        out["catalog"] = ".".join(parts[:-2])
    return out
