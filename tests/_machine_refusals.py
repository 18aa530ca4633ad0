"""The refusal table: a text for every error kind a machine text can reach, where it is
reported (line, column) and the words its message must hold; and the machines its include
cases name. Shared by ``test_machine_errors`` and the interop test."""

from __future__ import annotations

from typing import Final

from _machine_world import headers

H = headers
#: The machines the include cases name, by reference.
SUBS: Final = {
    "words-upper": H("words", "upper") + "\ntext -> words -> ws\nws -> upper -> loud",
    "two-in": H("pair") + "\n(left=a, right=b) -> pair -> c",
    "two-out": H("split") + "\nt -> split -> (head=h, stats=s)",
    "same-in": H("count") + "\nx -> count -> n\ny -> count -> m",
    "loop-a": 'sub machine "loop-b"\nx -> sub -> y',
    "loop-b": 'sub machine "loop-a"\nx -> sub -> y',
    "bad": "doc -> nothing -> x",
}
WU: Final = 'sub machine "words-upper"\n'

# (kind, text, line, column, words the message must hold). Line None: the whole text is at
# fault, so no statement is named.
TABLE: Final = [
    ("ParseError", "doc -> words ->", 1, 16, ["end of the text"]),
    ("ParseError", H("words") + "\ndoc -> words -> ws ]", 2, 20, []),
    ("EmptyMachineError", "  \n ", None, None, ["empty"]),
    ("NoEdgesError", H("words"), None, None, ["no wiring"]),
    ("InvalidCapUrnError", "w cap:op=x;op=y\ndoc -> w -> ws", 1, 1, ["'w'", "'op'"]),
    ("UndefinedAliasError", H("words") + "\ndoc -> shout -> x", 2, 1, ["'shout'"]),
    ("DuplicateAliasError", H("words", "words") + "\ndoc -> words -> x", 2, 1, ["'words'"]),
    ("NodeAliasCollisionError", H("words", "upper") + "\ndoc -> words -> upper", 3, 1,
     ["'upper'"]),
    ("ReservedNodeNameError", H("words") + "\ndoc -> words -> null", 2, 17, ["'null'"]),
    ("ReservedNodeNameError", H("words") + "\ntrue -> words -> ws", 2, 1, ["'true'"]),
    ("UnnamedConstantError", H("words") + '\n("hi") -> words -> ws', 2, 2, ["name=value"]),
    ("SeveralUnnamedTargetsError", H("split") + "\ndoc -> split -> (a, b)", 2, 21,
     ["'split'", "'a'", "'b'"]),
    ("InvalidPolicyError", H("words") + "\ndoc -> words{tries=2} -> ws", 2, 14,
     ["'words'", "'tries'"]),
    ("InvalidPolicyError", H("words") + "\ndoc -> words{retry=1, retry=2} -> ws", 2, None,
     ["'words'", "retry"]),
    ("InvalidPolicyError", H("words") + '\ndoc -> words{on_error=maybe} -> ws', 2, None,
     ["'words'", "on_error"]),
    ("MachineReferenceWithoutSourceError", WU + "doc -> sub -> x", 1, 1,
     ["'sub'", '"words-upper"']),
    ("UnknownCapError", 'w cap:in="media:enc=utf-8";op=nothing;out="media:enc=utf-8"\n'
     "doc -> w -> x", 2, 1, ["op=nothing"]),
    ("UnknownArgNameError", H("words") + "\n(nope=doc) -> words -> ws", 2, 1,
     ["'nope'", "'text'"]),
    ("UnknownOutputNameError", H("words") + "\ndoc -> words -> (nope=ws)", 2, 1,
     ["'nope'", "'words'"]),
    ("NoMainOutputError", H("log") + "\ndoc -> log -> x", 2, 1, ["'log'", "output=node"]),
    ("OutputTakenTwiceError", H("split") + "\ndoc -> split -> (head=a, head=b)", 2, 1,
     ["'split'", "'head'"]),
    ("NodeMediaConflictError", H("count", "split") + "\na -> count -> x\nb -> split -> x", 4, 1,
     ["'x'", "media:integer;numeric", "media:enc=utf-8"]),
    ("UntypedMachineInputError", H("pair") + "\n(a, b) -> pair -> c", 2, 1,
     ["'pair'", "'a'", "'b'"]),
    ("SourceDoesNotConformToArgError",
     H("count", "upper") + "\ndoc -> count -> n\n(word=n) -> upper -> u", 4, 1,
     ["'upper'", "'n'", "'word'"]),
    ("ArgBoundTwiceError", H("count") + "\n(text=a, text=b) -> count -> n", 2, 1,
     ["'count'", "'text'"]),
    ("UnmatchedSourceInCapArgsError", H("count", "upper") + "\ndoc -> count -> n\nn -> upper -> u",
     4, 1, ["'upper'", "'n'"]),
    ("AmbiguousMachineNotationError",
     H("pair") + "\n(left=d1, right=x) -> pair -> c1\n(left=d2, right=y) -> pair -> c2\n"
     "(x, y) -> pair -> c3", 4, 1, ["'pair'", "'x'", "'y'", "'left'", "'right'"]),
    ("MainInputUnboundError", H("join") + '\n(sep=", ") -> join -> t', 2, 1,
     ["'join'", "'words'"]),
    ("CapDoesNotDeclareInputError", H("odd") + "\ndoc -> odd -> x", 2, 1, ["'odd'", "stdin"]),
    ("CyclicMachineStrandError", H("upper") + "\na -> upper -> b\nb -> upper -> a", 2, 1,
     ["'upper'"]),
    # Machines in step position, through a mapping source.
    ("UnknownMachineReferenceError", 'sub machine "nope"\ndoc -> sub -> x', 1, 1,
     ["'sub'", '"nope"']),
    ("CyclicMachineReferenceError", 'sub machine "loop-a"\ndoc -> sub -> x', 1, 1,
     ["loop-a -> loop-b -> loop-a"]),
    ("InvalidIncludedMachineError", 'sub machine "bad"\ndoc -> sub -> x', 1, 1,
     ["'sub'", '"bad"', "UndefinedAliasError", "'nothing'"]),
    ("PolicyOnMachineError", WU + "doc -> sub{retry=2} -> x", 2, 1, ["'sub'", "policy"]),
    ("UnknownMachineInputError", WU + "(nope=doc) -> sub -> x", 2, 1, ["'sub'", "'nope'", "text"]),
    ("UnknownMachineOutputError", WU + "doc -> sub -> (nope=x)", 2, 1, ["'sub'", "'nope'", "loud"]),
    ("MachineInputBindingError", 'sub machine "two-in"\n(a=x) -> sub -> o', 2, 1,
     ["'sub'", "'b'", "nothing"]),
    ("MachineInputBindingError", 'sub machine "two-in"\n(a=x, a=y) -> sub -> o', 2, 1,
     ["'sub'", "'a'", "2 times"]),
    ("MachineOutputTakenTwiceError", WU + "doc -> sub -> (loud=a, loud=b)", 2, 1,
     ["'sub'", "'loud'"]),
    ("UnnamedMachineTargetError", 'sub machine "two-out"\ndoc -> sub -> o', 2, 1,
     ["'sub'", "h, s"]),
    ("UntypedMachineMemberError", 'sub machine "two-in"\n(x, y) -> sub -> o', 2, 1,
     ["'sub'", "'x'", "'y'"]),
    ("UnmatchedMachineMemberError", H("count") + "\n" + WU + "d -> count -> n\nn -> sub -> o", 4, 1,
     ["'sub'", "'n'"]),
    ("AmbiguousMachineMembersError",
     H("split") + '\nsub machine "same-in"\na -> split -> h1\nb -> split -> h2\n'
     "(h1, h2) -> sub -> (n=o1, m=o2)", 5, 1, ["'sub'", "'h1'", "'h2'", "x or y"]),
    ("SourceDoesNotConformToMachineInputError",
     H("count") + "\n" + WU + "d -> count -> n\n(text=n) -> sub -> o", 4, 1,
     ["'sub'", "'n'", "'text'", "media:integer;numeric"]),
]  # fmt: skip
