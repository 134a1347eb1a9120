"""No import cycle between modules of fragility_tui/ and runners/, imports inside functions
included (issue 21): a cycle means neither side can be read, tested or moved without the
other. The graph is grimp's, the library import-linter builds its contracts on."""

from __future__ import annotations

import grimp


def module_cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (each a cycle, or several
    cycles sharing modules), each sorted, found by Tarjan's algorithm without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe(graph, component: list[str]) -> str:
    """Every import between the component's modules, with its line."""
    lines = []
    for a in component:
        for b in sorted(graph.find_modules_directly_imported_by(a) & set(component)):
            details = graph.get_import_details(importer=a, imported=b)
            where = "; ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)
            lines.append(f"    {a} -> {b}   ({where})")
    return f"  cycle among {', '.join(component)}:\n" + "\n".join(lines)


def test_the_cycle_finder_finds_a_cycle_inside_functions_too():
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b", line_number=1, line_contents="import p.b")
    graph.add_import(importer="p.b", imported="p.c", line_number=9,
                     line_contents="from p import c  # inside a function")
    graph.add_import(importer="p.c", imported="p.a", line_number=3, line_contents="import p.a")
    graph.add_import(importer="p.c", imported="p.d", line_number=4, line_contents="import p.d")
    assert module_cycles(graph) == [["p.a", "p.b", "p.c"]]
    assert "p.b -> p.c   (line 9: from p import c  # inside a function)" in describe(
        graph, ["p.a", "p.b", "p.c"])


def test_grimp_sees_imports_inside_functions():
    graph = grimp.build_graph("fragility_tui", "runners", cache_dir=None)
    # tui/startup.py imports the keymap only inside apply_keymap
    assert "fragility_tui.tui.keymap" in graph.find_modules_directly_imported_by(
        "fragility_tui.tui.startup")


def test_no_import_cycle_between_modules():
    graph = grimp.build_graph("fragility_tui", "runners", cache_dir=None)
    cycles = module_cycles(graph)
    assert not cycles, (f"{len(cycles)} import cycle(s); break each along a real boundary "
                        "(a public interface, or merge and re-split):\n"
                        + "\n".join(describe(graph, c) for c in cycles))
