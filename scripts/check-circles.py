#!/usr/bin/env python3
"""Module import circles per crate: `python3 scripts/check-circles.py [ROOT]`.

Edges go from each source file's module to the modules it names through `crate::a::b` or
`super::x` paths (use lines and paths inline; comments and strings left out), resolved to
the longest module that exists. A parent naming its own child module is structure, not an
edge. Test code is left out: `tests.rs`, `tests/`, `testing`, and everything from a
`#[cfg(test)] mod` to the end of its file. Prints every strongly connected component of
more than one module with its edges; exits 1 if there is one."""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else '.'
members = []
for line in open(os.path.join(root, 'Cargo.toml')):
    m = re.match(r'members\s*=\s*\[(.*)\]', line)
    if m:
        members = [x.strip().strip('"') for x in m.group(1).split(',') if x.strip()]
def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
    return src
total = 0
for crate in members:
    src = os.path.join(root, crate, 'src')
    if not os.path.isdir(src):
        continue
    mods = {}
    for dp, dn, fn in os.walk(src):
        if '/bin' in dp[len(src):]:
            continue
        for f in fn:
            if not f.endswith('.rs'):
                continue
            rel = os.path.relpath(os.path.join(dp, f), src)[:-3].split('/')
            if rel in (['lib'], ['main']):
                path = ()
            elif rel[-1] == 'mod':
                path = tuple(rel[:-1])
            else:
                path = tuple(rel)
            if 'tests' in path or (path and path[-1].startswith('tests')) or (path and path[-1] == 'testing'):
                continue
            if rel == ['main'] and os.path.exists(os.path.join(src, 'lib.rs')):
                continue
            mods[path] = os.path.join(dp, f)
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        s = strip(open(f).read())
        # drop #[cfg(test)] mod tests { ... } bodies
        s = re.sub(r'#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*', '', s, flags=re.S)
        refs = []
        for g in re.finditer(r'\bcrate((?:::\w+)+)', s):
            refs.append(tuple(g.group(1).split('::')[1:]))
        # `use crate::{a::b, c}` groups
        for g in re.finditer(r'\buse\s+crate::\{([^;]*)\};', s, flags=re.S):
            for part in re.split(r',', re.sub(r'\{[^{}]*\}', '', g.group(1))):
                part = part.strip()
                if part:
                    refs.append(tuple(part.split(' ')[0].split('::')))
            for g2 in re.finditer(r'(\w+)::\{', g.group(1)):
                refs.append((g2.group(1),))
        for g in re.finditer(r'\b((?:super::)+)(\w+(?:::\w+)*)', s):
            up = g.group(1).count('super::')
            is_mod_rs = f.endswith('mod.rs') or f.endswith('lib.rs')
            base = m[:len(m) - up] if not is_mod_rs else m[:len(m) - up]
            refs.append(tuple(base) + tuple(g.group(2).split('::')))
        for g in re.finditer(r'\buse\s+super::\{([^;]*)\};', s, flags=re.S):
            up = 1
            for part in g.group(1).split(','):
                part = part.strip()
                if part:
                    refs.append(tuple(m[:len(m) - up]) + tuple(part.split(' ')[0].split('::')))
        for r in refs:
            # longest existing module prefix
            t = None
            for k in range(len(r), -1, -1):
                if tuple(r[:k]) in mods:
                    t = tuple(r[:k]); break
            if t is None or t == m:
                continue
            # a parent naming its own child module (declaring, re-exporting) is structure
            if t[:len(m)] == m:
                continue
            # a child naming its ancestor only as a path prefix is not a dependency on it
            if m[:len(t)] == t and len(r) > len(t) and tuple(r[:len(t)+1]) in mods:
                continue
            edges[m].add(t)
    # Tarjan
    idx, low, st, on, sccs, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def sc(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in edges[v]:
            if w not in idx:
                sc(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                sccs.append(comp)
    for v in edges:
        if v not in idx:
            sc(v)
    for comp in sccs:
        total += 1
        names = sorted('::'.join(x) or 'crate' for x in comp)
        print(f'{crate}: circle of {len(comp)}: ' + ', '.join(names))
        for a in sorted(comp):
            for b in sorted(edges[a] & set(comp)):
                print(f'    {"::".join(a) or "crate"} -> {"::".join(b) or "crate"}')
print(f'{total} circle(s)')
sys.exit(1 if total else 0)
