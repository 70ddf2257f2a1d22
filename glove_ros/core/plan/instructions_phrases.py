"""Everyday phrasings of open instructions, rewritten to the words the instruction grammar reads.

Users do not say "go to the larder, then go to the belfry": they say "swing by the larder on
your way to the belfry", "pop into the larder and once you're done there make your way to
the belfry", "um, could you check on the larder first?". :func:`canonical` rewrites such
phrasings, one table row at a time, into the grammar's own words (``go to``, ``check``,
``look for X in``, ``dock``, ``then``, ``avoid``, ``if ... is not in``), before
:func:`~glove_ros.core.plan.instructions.understand_instruction` reads the text.

A rewrite only changes connecting words, never a name: a row whose match would add, drop or
reorder a place, colour or object of the map is not applied (a map with a place called
"base" keeps "go to the base" as a drive to that place, not a dock). Nothing here decides
anything: the rewritten text goes through the same grammar, the same checks on the map and
the same refusals as the user's own words would.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from glove_ros.core.plan.tasks import names_in

_END = (r"(?=\s*(?:[,;.?!]|$|\s+(?:then|and|but|without|avoiding|keeping|staying|steering|while|"
        r"unless)\b))")  # a phrase ends at a separator or where a constraint starts
_CLAUSE = r"(^|[,;.]\s*|\bthen\s+|\band\s+)"  # where a clause starts (kept as group 1)
_PLACE = r"(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?"
_DOCKING = "return to the charger"  # the grammar's dock request, naming no place
_THING = (r"(?:the|a|an|any|some|my)\s+[a-z][\w-]*(?:\s+(?!(?:and|then|but|or|in|at|is|are|still|th"
          r"ere|here|somewhere)\b)[a-z][\w-]*)?")

#: what a user may add to a place's name ("the microfilm room" for "microfilm")
_KIND_WORDS = ("room", "area", "section", "zone", "space")

#: contractions the grammar reads spelled out
CONTRACTIONS: tuple[tuple[str, str], ...] = (
    (r"\b(there|it|what|where|that|here)'s\b", r"\1 is"),
    (r"\byou're\b", "you are"), (r"\b([a-z]+)'s\s+(?=(?:in|at|inside|still|not|there|here)\b)",
                                 r"\1 is "), (r"\byou've\b", "you have"),
    (r"\b(i|we|they)'ve\b", r"\1 have"), (r"\bi'd\b", "i would"),
    (r"\bi'm\b", "i am"), (r"\blet's\b", "let us"),
)

#: (pattern, replacement) in the order they are tried; every one case-insensitive
PHRASES: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    # hesitations and politeness: said, not meant as a step
    (r"\b(?:would|do)\s+you\s+mind\s+(?P<v>driv|head|go|check|look|search|visit|find|return|"
     r"com|stopp|swing|popp|dropp|tak|mak|bring|nipp|runn|scoot|zipp)ing\b", r"\g<v>ing_"),
    (r"\b(driv|com|tak|mak)ing_", r"\1e"),
    (r"\b(stop|pop|drop|nip|run|zip)ping_", r"\1"),
    (r"\b(\w+)ing_", r"\1"),
    (r"^(?:(?:your|the|my)\s+)?battery(?:'s|\s+is|\s+must\s+be|\s+should\s+be|\s+will\s+be)\s+(?:get"
     r"ting\s+|running\s+|looking\s+|almost\s+|"
     r"nearly\s+)?(?:a\s+bit\s+|very\s+|quite\s+|pretty\s+)?(?:low|flat|empty|dying|dead)(?:\s+by"
     r"\s+now)?\s*[,;.]\s*"
     r"(?:so\s+)?(?:(?:you\s+)?(?:had\s+)?(?:best|better)\s+)?(?=\S)", ""),
    (r"\b(?:where|wherever)\s+(?P<t>" + _THING + r")\s+was\s+(?:spotted|seen|sighted|noticed)\s+(?:"
                                                 r"last|most\s+"
     r"recently)\b", r"where \g<t> was last seen"),
    (r"^(?:hi|hello|hey)\s+there\b[,!.\s]*|^(?:hiya|hi|hello|hey|morning|good\s+morning)"
     r"\s*[!,.]\s*", ""),
    # "The instructors want an update. Inspect ...": a sentence that asks nothing (a name in it
    # stays: the row is then skipped)
    (r"^(?![^.?!]*\b(?:go|find|check|look|search|drive|head|visit|inspect|avoid|return|dock|where|"
     r"what|is|are|was|were|stop|wait|do|don't|never|no|not|if|unless|stay|keep|steer)\b)[^.?!]+[.!]"
     r"\s+(?=\S)", ""),
    (r"^(?:cheers|thanks|thank\s+you)\s+for\s+[^.!?]*[.!]\s*", ""),
    (r"^(?:you\s+are\s+(?:all\s+)?(?:done|finished)|you\s+have\s+(?:done|worked)\s+(?:enough|plenty|"
     r"well)|that\s+is\s+enough|good\s+(?:work|"
     r"job)|well\s+done|nice\s+(?:work|job)|great\s+(?:work|job))(?:\s+for\s+(?:today|now|the\s+"
     r"day|the\s+night|the\s+evening|tonight))?\s*[,;.!]\s*", ""),
    (r"^(?:(?:just\s+)?from\s+(?:memory|what\s+you\s+(?:remember|have\s+seen))|as\s+far\s+as\s+you"
     r"\s+(?:know|reme"
     r"mber|can\s+tell)|off\s+the\s+top\s+of\s+your\s+"
     r"head|without\s+(?:looking|checking|going\s+there))\s*,\s*", ""),
    (r"^(?P<t>" + _THING + r")\s*[,;:]\s*where\s+did\s+you\s+(?:see|spot|notice)\s+(?:it|them)"
     r"\s+(?:last|most\s+recently)\s*\??$", r"where did you last see \g<t>?"),
    (r"^(?:(?:a\s+)?quick\s+question|one\s+question|question|just\s+wondering|out\s+of\s+interest)\s*"
     r"[:,-]\s*", ""),
    # "before the cast arrives, ...": when, said before the request (a name in it stays)
    (r"^(?:before|after|once|when)\s+(?:the\s+|your\s+|my\s+|our\s+)?[a-z]+(?:\s+[a-z]+)?\s+(?:arriv"
     r"es?|gets?\s+(?:here|in|back)|comes?\s+(?:in|back)|leaves?|opens?|closes?|starts?|begins?|"
     r"ends?|finish(?:es)?|wakes?\s+up)\s*,?\s*", ""),
    (r"^(?:so\s+)?i\s+was\s+wondering\s+if\s+you\s+could\s+(?:do\s+me\s+a\s+favou?r\s*[:,]\s*)?",
     ""),
    (r"^(?:ok(?:ay)?\s*,?\s+)?(?:so\s+)?what\s+i\s+need\s+is\s*,?\s*(?:um\s*,?\s*)?(?:for\s+you\s+)"
     r"?to\s+", ""),
    (r"(?:\s*,)?\s*if\s+it\s+is\s+not\s+too\s+much\s+trouble\s*,?", ""),
    (r"\s+at\s+all(?=\s*(?:[,;.?!]|$))", ""),
    (r"[.,;]\s*oh\s*,?\s*(?=and\b)", ", "),
    (r"[,;]\s*(?:it|they)\s+(?:is|are)\s+being\s+\w+(?=\s*(?:[.;!?]|$))", ""),
    # "stay out of the den, they're hosing it down": the reason, not a step
    (r"[,;]\s*(?:please\s*,?\s*)?(?:they|people|someone|somebody|the\s+[a-z]+)(?:'re|'s|\s+are|\s+is)"
     r"\s+[a-z]+ing(?:\s+(?:it|them|the\s+[a-z]+))?(?:\s+(?:down|out|up|over))?(?:\s+in\s+there)?(?="
     r"\s*(?:[.;!?]|$))", ""),
    (r"[,;]\s*(?:it|they)(?:'s|'re|\s+is|\s+are)\s+(?:blocked|full|cluttered|piled\s+up|jammed)\s+wi"
     r"th\s+[a-z]+(?:\s+[a-z]+)?(?=\s*(?:[.;!?]|$))", ""),
    # "The line manager wants a quick tour: go to ...": what comes before the colon says why
    (r"^(?![^:]*\b(?:avoid|not|never|if|unless)\b)[^:.!?]{0,60}:\s*(?=\S)", ""),
    (r"^you\s*(?:'re|\s+are)\s+(?:running|getting)\s+(?:a\s+bit\s+|pretty\s+|quite\s+)?low\s+on\s+(?:b"
     r"attery|charge|power)\s*[,;.]\s*(?:so\s+)?(?:(?:you\s+)?(?:had\s+)?(?:best|better)\s+)?(?=\S)",
     ""),
    (r"^(?:a\s+)?quick\s+(?:check|look)\s+(?:of|at|in)\s+(?=\S)", "check "),
    (r"\s+(?:before|after|once|when)\s+(?:the\s+|your\s+|my\s+|our\s+)?[a-z]+(?:\s+[a-z]+)?\s+(?:arr"
     r"ives?|gets?\s+(?:here|in|back)|comes?\s+(?:in|back)|opens?|starts?|begins?)" + _END, ""),
    (r"^(?:do\s+you\s+(?:think|reckon|suppose)|would\s+you\s+say)\s+(?P<t>" + _THING
     + r")\s+(?:is|are)\s+(?P<r>(?:still\s+)?(?:in|at|inside)\s)", r"is \g<t> \g<r>"),
    (r"[.,;!]?\s*(?:so\s+)?(?:off\s+you\s+go|away\s+you\s+go|go\s+on\s+then|chop\s+chop)\s*[.!]?$",
     ""),
    (r"\s+(?:too|as\s+well|either)(?=\s*(?:[,;.?!]|$))", ""),
    (r"\bshould\s+(?P<t>" + _THING + r")\s+turn\s+out\s+(?P<n>not\s+)?to\s+be\s+(?=(?:in|at|inside)"
     r"\s)",
     r"if \g<t> is \g<n>"),
    # "if the cup is not in the den, search the lab for it; if it is, go home": the else
    (r"(?P<a>\bif\s+[^;,]*?\b(?:is|are)\s+not\b[^;]*?)[;,]\s*(?:and\s+)?if\s+(?:it|they)\s+(?:is|are)"
     r"(?:\s+there)?\s*,\s*", r"\g<a>, otherwise "),
    # "don't go through the lab, the floor's just been sealed": the reason, not a step
    (r"[,;]\s*(?:it|they|the\s+[a-z]+)(?:'s|\s+is|\s+are|\s+has|\s+have)\s+(?:just\s+|only\s+just\s+"
     r")?(?:been|being)\s+[a-z]+(?=\s*(?:[.;!?]|$))", ""),
    # "we've got visitors at ten, so could you ...": why, before the request
    (r"^(?![^,;.?!]*\b(?:go|find|check|look|search|drive|head|visit|inspect|avoid|return|dock)\b)"
     r"[^,;.?!]*?,\s*so\s+(?=\S)", ""),
    # "the passage from A to B is closed off today, so keep out of it": the closure says it
    (r"(?P<a>\b(?:is|are)\s+(?:now\s+)?(?:closed|shut|blocked|off[\s-]limits|out\s+of\s+bounds|forbi"
     r"dden|sealed|cordoned|being\s+[a-z]+ed)(?:\s+off)?(?:\s+[a-z]+){0,3}?)\s*[,;]?\s*so\s+(?:plea"
     r"se\s+)?(?:keep\s+out\s+of|keep\s+off|stay\s+off|stay\s+out\s+of|avoid|keep\s+away\s+from|steer"
     r"\s+clear\s+of|do\s+not\s+go(?=\s+there)|do\s+not\s+(?:use|take|go"
     r"\s+(?:in|into|through)))\s+(?:it|that|them|there)(?=\s*(?:[.;!?]|$))", r"\g<a>"),
    (r"^without\s+(?:going|moving|driving)\s+anywhere\s*,?\s*", ""),
    (r"\s*,\s*though\s*,\s*", ", "),
    (r"\beither\s+(?=(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?\s+or\b)", ""),
    (r"[.,;]?\s*(?:search|look)\s+(?:wherever|anywhere)(?:\s+you\s+(?:think|like|want)(?:\s+(?:best"
     r"|fit))?)?$",
     ""),
    (r"^on\s+(?:the|your)\s+way\s+(?:over\s+)?(?:to|into)\s+(?P<a>" + _PLACE + r")\s*,\s*(?P<b>[^,;"
                                                                               r"]+)$",
     r"\g<b>, then go to \g<a>"),
    (r"^(?:ok(?:ay)?|right|so)?\s*,?\s*(?:a\s+couple\s+of|a\s+few|two|three)\s+things\s*[:,]\s*",
     ""),
    (r"(?:^|(?<=[.;,?!]\s))either\s+way\s*,?\s*", ""),
    (r"[,\s]+(?:any|either)\s+(?:of\s+(?:those|them|these|the\s+\w+)|one)\s+(?:is\s+fine|works|will"
     r"\s+do|"
     r"is\s+ok(?:ay)?)" + r"(?=\s*(?:[,;.?!]|$))", ""),
    (r"\b(?P<v>(?:go|drive|head)\s+to|check|visit|inspect)\s+(?P<a>" + _PLACE
     + r")\s*,\s*(?P<b>" + _PLACE
     + r")\s*,?\s+or\s+(?P<c>" + _PLACE + r")" + _END, r"\g<v> \g<a> or \g<b> or \g<c>"),
    # "the buffet's being mopped, so please avoid it": a reason, then the constraint
    (r"^(?P<p>(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?)(?:'s|\s+is|\s+are)\s+being\s+\w+\s*,?\s*"
     r"(?:so\s+)?(?:please\s+)?(?P<v>avoid|keep\s+out\s+of|stay\s+out\s+of|keep\s+away\s+from)\s+(?"
     r":it|"
     r"them)\b", r"\g<v> \g<p>"),
    (r"[,;]?\s*so\s+(?:do\s+not|never)\s+(?:take|use|go\s+through|go\s+that\s+way)(?:\s+it|\s+that)"
     r"?"
     r"(?=\s*(?:[.;!?]|$))", ""),
    (r"[,;]?\s*so\s+(?:take|use|go)\s+(?:the\s+)?(?:other|another|long)\s+(?:way|route)\s+(?:round"
     r"\s+|"
     r"around\s+)?to\s+", ", go to "),
    (r"\bgive\s+(?P<p>" + _PLACE + r")\s+a\s+(?:miss|wide\s+berth)\b", r"avoid \g<p>"),
    (r"^(?:go|head|drive)\s+to\s+(?P<a>" + _PLACE + r")\s*,?\s*(?:but\s+|and\s+)?(?:stop|call|pop|d"
                                                    r"rop)\s+"
     r"(?:off\s+)?(?:at|in|by|into)\s+(?P<b>" + _PLACE + r")\s+on\s+(?:the|your)\s+way\s+and\s+(?:t"
                                                         r"ake|have)\s+"
     r"a\s+(?:quick\s+)?look$", r"check \g<b>, then go to \g<a>"),
    (r"^(?:go|head|drive)\s+to\s+(?P<a>" + _PLACE + r")\s*,?\s*(?:but\s+|and\s+)?(?:stop|call|pop|d"
                                                    r"rop)\s+"
     r"(?:off\s+)?(?:at|in|by|into)\s+(?P<b>" + _PLACE + r")\s+on\s+(?:the|your)\s+way$",
     r"go to \g<b>, then go to \g<a>"),
    (r"[.,;?]?\s*just\s+drive\s*[,;.]?\s*(?:there\s+is\s+)?(?:no\s+need\s+to\s+(?:look|check|stop)("
     r"?:\s+around|"
     r"\s+inside|\s+anywhere)?)?$", ""),
    (r"^(?:go|head|drive)\s+to\s+(?P<a>" + _PLACE + r")\s*,?\s*(?:and\s+)?on\s+(?:the|your)\s+way\s"
                                                    r"*,?\s*"
     r"(?:stop|call|pop|drop)\s+(?:off\s+)?(?:at|in|by|into)\s+(?P<b>" + _PLACE + r")\s+and\s+(?:ta"
                                                                                  r"ke|have)\s+a\s+"
     r"(?:quick\s+)?look$", r"check \g<b>, then go to \g<a>"),
    (r"\b(?:um+|uh+|erm*|hmm+)\b\s*,?\s*", ""),
    (r"\s*(?:\.{2,}|\u2026)\s*", " "),  # "the waiting room... or was it outpatients?"
    (r"\b(?:or\s+(?:was|is)\s+it|or\s+maybe|or\s+perhaps|or\s+rather)\s+", "or "),
    (r"[,.?\s]*\b(?:one\s+of\s+(?:those|them|the\s+two)|i\s+(?:forget|am\s+not\s+sure))\s*$", ""),
    (r"\s*,\s*or\s+(?=the\s)", " or "),
    (_CLAUSE + r"(?:(?:ok(?:ay)?|alright|right|well|so|now|hey|hi|robot|please)\b[,\s]+)+",
     r"\1"),
    (_CLAUSE + r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|i\s+(?:need|want|would\s+"
     r"like)\s+(?:you\s+)?to\s+|you\s+(?:can|could|should|may)\s+(?:now\s+)?|go\s+ahead\s+and\s+"
     r"|be\s+so\s+kind\s+as\s+to\s+|(?:please\s+)?make\s+sure\s+(?:you|to)\s+)", r"\1"),
    (r"[,\s]+(?:please|pls|plz|thanks|thank\s+you|cheers|now|for\s+me|right\s+away|do\s+you\s+know|"
     r"any\s+id"
     r"ea|"
     r"(?:would|will|could|can)\s+you(?:\s+please)?|when\s+you\s+(?:can|"
     r"get\s+a\s+(?:chance|sec|second|minute|moment))|the\s+whole\s+time|at\s+all\s+times|"
     r"if\s+you\s+(?:can|could|would|do\s+not\s+mind))" + _END, ""),
    (r"\s+(?:on\s+the\s+way|another\s+way|around\s+here|round\s+here|while\s+you\s+are\s+at\s+"
     r"it|real\s+quick|ahead\s+of\s+me|before\s+me|on\s+the\s+way\s+back|while\s+you\s+(?:do|are\s+"
     r"at\s+it)|while\s+doing\s+(?:so|it|that)|after\s+telling\s+me|after\s+you\s+(?:have\s+)?told"
     r"\s+me)" + _END, ""),
    (r"[,;]\s*or\s+else\b\s*,?", ", otherwise "),
    (r"\btrack\s+(it|them)\s+down\b", r"find \1"),
    (r"^(?:give\s+me|i\s+(?:want|would\s+like|need))\s+(?:a|an|the)\s+(?:quick\s+|brief\s+|short\s+)?"
     r"(?:rundown|run-down|update|report|summary|overview)\s+(?:of|on)\s+(?=what\b)", "tell me "),
    (r"[.!?]\s*(?:thanks|thank\s+you|cheers)(?:\s+(?:so|very)\s+much|\s+a\s+lot)?\s*[.!]?$", ""),
    (r"[,\s]+(?:as\s+far\s+as\s+you\s+(?:know|remember|can\s+tell)|from\s+(?:memory|what\s+you\s+(?:"
     r"have\s+)?seen))(?=\s*[?.!]?$)", ""),
    (r"^i\s+(?:have|had)\s+(?:lost|misplaced|mislaid)\s+(?P<t>" + _THING + r")(?:\s+again)?\s*[.,;]"
     r"\s*where\s+did\s+you\s+(?:last\s+)?(?:see|spot)\s+(?:it|them)(?:\s+last)?\s*\??$",
     r"where did you last see \g<t>?"),
    (r"\b(?:the\s+[a-z]+|someone|somebody|they|he|she)\s+(?:wants?|needs?)\s+you\s+(?:up\s+|over\s+"
     r"|down\s+|out\s+)?(?:at|in|by)\s+(?=\S)", "go to "),
    # "stay away from the barn, there's a school group in there": the reason, not a step
    (r"[,;]\s*there\s+(?:is|are)\s+[^,;.?!]*?\s+in\s+there(?=\s*(?:[.;!?]|$))", ""),
    (r"[,\s]+i\s+am\s+afraid" + _END, ""),
    (r"[,\s]+(?:in\s+(?:that|this|the\s+same)\s+order|one\s+after\s+(?:the\s+)?other)" + _END, ""),
    (r"\b(is|are)\s+(?:out|over|up|down|back)\s+(?=(?:in|at|inside)\s)", r"\1 "),
    (r"\s(?:out|over|up|down|back)\s+(?=(?:in|at|inside)\s)", " "),
    (r"\bgo\s+(?:and\s+)?(?:see|check|find\s+out|look)\s+(?:whether|if)\s+(?:there\s+(?:is|are)\s+)"
     r"?"
     r"(?P<t>" + _THING + r")\s+(?:is|are)\s+(?:still\s+)?(?:in|at|inside)\s+(?P<p>" + _PLACE + r")"
     + _END, r"look for \g<t> in \g<p>"),
    (r"\bgo\s+(?:and\s+)?(?:see|check|find\s+out|look)\s+(?:whether|if)\s+(?P<t>" + _THING
     + r")\s+is\s+(?:still\s+)?(?:in|at|inside)\s+(?P<p>" + _PLACE + r")" + _END,
     r"look for \g<t> in \g<p>"),
    (r"^(?:that\s+is|that's)\s+(?:all|it|everything)(?:\s+for(?:\s+(?:now|today|the\s+day))?)?(?:\s"
     r"*,\s*(?:thanks|thank\s+you|cheers))?\s*[,;.]\s*",
     ""),
    (r"^i\s+(?:need|want|would\s+like)\s+you\s+(?:in|at|over\s+in|over\s+at)\s+(?=\S)", "go to "),
    (r"\bshould\s+you\s+(?=(?:find|see|spot)\s)", "if you "),
    (r"^off\s+you\s+go\s+(?:and\s+)?(?=(?:charge|recharge|dock)\b)", "go and "),
    (r"^off\s+(?:you\s+go\s+)?to\s+(?P<p>" + _PLACE + r")(?:\s+with\s+you)?$", r"go to \g<p>"),
    (r"^(?:has|have)\s+(?:anything|something|much|things)\s+changed\b", "what has changed"),
    (r"\b(?:return|go\s+back|head\s+back|get\s+back|drive\s+back)\s+to\s+(?=(?:the\s+(?:place|spot)"
     r"\s+)?"
     r"(?:where\s+)?you\s+last\b)", "go to "),
    (r"\s*,?\s*(?:and\s+)?whatever\s+you\s+do\s*,\s*", ", and "),
    (r"\bif\s+it\s+turns\s+out\s+(?:that\s+)?", "if "),
    (r"\bturns?\s+out\s+to\s+be\s+(?=(?:in|at|inside)\s)", "is "),
    (r"\btime\s+to\s+(?:re)?charge\s*,?\s*(?:so\s+)?(?:head|go|come)\s+(?:back|home)(?:\s+to\s+(?:t"
     r"he\s+|"
     r"your\s+)?(?:dock|charger|base|docking\s+station|charging\s+station))?\b", _DOCKING),
    (r"\bpark\s+(?:yourself\s+)?(?:on|at|in|onto)\s+(?:the\s+|your\s+)?(?:dock|charger|docking\s+st"
     r"ation|"
     r"charging\s+station|base)\b", _DOCKING),
    (r"[.,;]?\s*(?:there\s+is\s+)?no\s+need\s+to\s+(?:go\s+(?:and\s+)?)?(?:look|check|stop)(?:\s+"
     r"around|\s+inside|\s+any"
     r"where)?"
     r"\s*[,;.]?\s*(?:just\s+drive)?$", ""),
    (r"\bjust\s+(?=(?:come|go|head|drive|return|dock|check|look|find)\b)", ""),
    (r"\btime\s+to\s+(?:re)?charge\b", _DOCKING),
    (r"\s+since\s+(?:you\s+)?(?:last\s+)?(?:looked|checked|were\s+here|came\s+by|went\s+round|came"
     r"\s+"
     r"round|did\s+(?:your|the|a)\s+rounds?|had\s+a\s+look|your\s+(?:last\s+)?(?:round|patrol|visit|"
     r"check|look)|the\s+last\s+time|last\s+time)(?:\s+(?:the|this)\s+[a-z]+)?(?:\s+"
     r"around)?" + _END, ""),
    (r"\b(?:had|taken|took|have\s+had)\s+a\s+(?:quick\s+)?look\s+(?:in|at|around|inside)\s+",
     "checked "),
    # order said as circumstances
    (r"^(?P<a>.+?)\s*,?\s+but\s+first\s+(?P<b>[^,;]+)$", r"\g<b>, then \g<a>"),
    (r"^(?P<a>.+?)\s*,?\s+(?:and\s+)?before\s+that\s*,?\s+(?P<b>[^,;]+)$", r"\g<b>, then \g<a>"),
    (r"^(?P<a>[^,;]+?)\s*,?\s+but\s+(?P<b>[^,;]+?)\s+(?:before\s+that|first|beforehand)$",
     r"\g<b>, then \g<a>"),
    (r"\s+(?:first|firstly)\s*,?\s+and\s+(?:then\s*,?\s+)?", ", then "),
    (r"\s+(?:second|secondly|third|thirdly|next|last|lastly)" + r"(?=\s*(?:[,;.?!]|$))", ""),
    (r"\s+(?:first|firstly)" + _END, ""),
    (r"(?<=\w)\s+(?:afterwards|afterward|after\s+that|at\s+the\s+end)(?=\s*(?:[,;.?!]|$))", ""),
    (r"[,;]?\s*(?:and\s*,?\s*)?on\s+(?:the|your)\s+way\s+back\s+(?:to\s+(?:the\s+|your\s+)?(?:charg"
     r"er|dock|base|docking\s+station|charging\s+station)|home)\s*,?\s*(?P<b>[^,;.]+)$",
     r", then \g<b>, then " + _DOCKING),
    (r"\s+on\s+(?:the|your|its|my)\s+way\s+(?:over\s+|back\s+)?(?:to|into)\s+", ", then go to "),
    (r"[.,;\s]+(?:and\s+)?(?:once|when|after)\s+(?:you\s+are|you\s+have|it\s+is|that\s+is|you)?\s*"
     r"(?:done|finished|through|been)(?:\s+(?:there|with\s+(?:that|it)|in\s+there))?\s*,?\s*"
     r"(?:(?:and\s+)?then\s+)?", ", then "),
    (r"\s*,?\s+and\s+(?:afterwards|after\s+that|then)\s*,?\s+", ", then "),
    (r"[,;]\s*(?:and\s+)?so\s+", ", "),
    # drive somewhere
    (r"\bmake\s+(?:a\s+)?(?:quick\s+|short\s+)?(?:stop|visit|trip)\s+(?:at|to|in)\s+", "go to "),
    (r"\b(?:swing|stop|drop|pop|call|pass|come|nip|zip|scoot)\s+(?:off\s+)?(?:by|past|into|in\s+(?:"
     r"at|to)|"
     r"over\s+to|round\s+to|around\s+to|down\s+to|up\s+to|across\s+to)\s+", "go to "),
    (r"\bstop\s+(?:off\s+)?(?:at|in)\s+", "go to "),
    (r"\bmake\s+(?:your|a|the)\s+way\s+(?:over\s+|back\s+|down\s+|up\s+)?(?:to|into)\s+",
     "go to "),
    (r"\b(?:take|bring|get|move|drag)\s+yourself\s+(?:over\s+|back\s+|off\s+|up\s+|down\s+|across\s+)"
     r"?(?:to|into)\s+", "go to "),
    (r"\b(?:head|go|move|run|roll|drive)\s+(?:over|on|out|off|down|up|across|along|straight)\s+(?:t"
     r"o|"
     r"into)\s+", "go to "),
    (r"\b(?:travel|proceed|continue|carry\s+on|move\s+on|go\s+on|roll|walk|navigate)\s+(?:on\s+)?"
     r"(?:over\s+)?(?:to|into)\s+", "go to "),
    (r"\b(?:begin|start)\s+(?:off\s+)?(?:at|in|with)\s+", "go to "),
    (r"\b(?:end|finish|end\s+up|wrap\s+up|finish\s+up)\s+(?:at|in)\s+", "go to "),
    (r"\b(?:reach|visit)\s+(?=the\s|[a-z])", "go to "),
    (r"\b(?:get|come)\s+(?:over\s+)?(?:to|into)\s+", "go to "),
    # back to the dock
    (r"^(?P<a>(?!(?:where|what|which|who|how|when|is|are|was|were|has|have(?!\s+a\s)|had|did|do|"
     r"does|can|could|would|will)\b).+?)\s*\?$", r"\g<a>"),  # "go to the lab?" is asked
    (r"\b(to|at|on)\s+your\s+(dock|charger|charging\s+station|docking\s+station|base)\b",
     r"\1 the \2"),
    (r"\b(?:go|come|head|get|return|drive|make\s+your\s+way)\s+(?:straight\s+)?(?:back\s+)?home\b",
     _DOCKING),
    (r"\b(?:(?:go|come|head|get|return|drive)\s+)?(?:back\s+)?to\s+(?:the\s+)?(?:base|home\s+base|"
     r"charging\s+(?:station|dock|point|pad)|docking\s+station)\b", _DOCKING),
    (r"\b(?:(?:go|come|head|get|return|drive|pop|nip|zip|scoot|run|swing)\s+)?back\s+to\s+(?:the\s"
     r"+)?(?:dock|charger)\b",
     _DOCKING),
    (r"\b(?:(?:go|come|head|get)\s+)?back\s+and\s+(?:re)?charge\b", _DOCKING),
    (r"\bback\s+home\b", _DOCKING),
    (r"(\bthen\s+|[,;]\s*(?:and\s+)?(?:then\s+)?)home(?:\s+again)?$", r"\1" + _DOCKING),
    (r"\b(?:go\s+and\s+|go\s+)?recharge\b|\bplug\s+(?:yourself\s+)?in\b", _DOCKING),
    (r"\bgo\s+and\s+charge\b", _DOCKING),
    (re.escape(_DOCKING) + r"(?:\s*(?:,|and|then|,\s*and|,\s*then|and\s+then)\s*"
     + re.escape(_DOCKING) + r")+", _DOCKING),
    # look
    (r"\bgo\s+(?:and\s+)?(?=(?:check|inspect|look|search)\b)", ""),
    (r"\b(?:check|look)\s+(?:on|up\s+on|in\s+on|over|out)\s+(?=the\s)", "check "),
    (r"\b(?:have|take)\s+a\s+(?:quick\s+|little\s+|proper\s+|good\s+)?(?:peek|peep|glance|look|gand"
     r"er|hunt|search|scout|rummage)\s+(?:inside|"
     r"in|into|at|around|round)\s+", "look in "),
    (r"\b(?:peek|peep|glance)\s+(?:inside|in|into|at)\s+", "look in "),
    (r"\bgive\s+(?P<p>" + _PLACE + r")\s+a\s+(?:quick\s+)?(?:once-over|look|check|glance|"
     r"look-see)" + _END, r"check \g<p>"),
    (r"\bhave\s+a\s+(?:quick\s+)?(?:nose|poke|rummage|scout)\s+(?:around|round|about)\s+(?:in\s+)?"
     r"(?=the\s)", "look in "),
    (r"\b(?:have|take)\s+a\s+(?:quick\s+|little\s+|proper\s+|good\s+)?look\s+for\s+", "look for "),
    (r"\b(?:look|search|hunt)\s+(?:around|round|about|through)\s+(?P<p>" + _PLACE + r")\s+for\s+"
     r"(?P<t>" + _THING + r")" + _END, r"look for \g<t> in \g<p>"),
    (r"\b(?:look|search|check)\s+(?:in|inside|at|around|round|through)\s+(?P<p>" + _PLACE
     + r")\s+for\s+(?P<t>" + _THING + r"|it|them)" + _END, r"look for \g<t> in \g<p>"),
    (r"\b(?:search|scan|sweep|comb|check)\s+(?P<p>" + _PLACE + r")\s+for\s+(?P<t>" + _THING + r"|"
     r"it|them)" + _END, r"look for \g<t> in \g<p>"),
    (r"\bgo\s+to\s+(?P<p>" + _PLACE + r")\s+and\s+(?:tell\s+me|report|say|see)\s+what\s+(?:you\s+)?"
     r"(?:see|find|spot|is)(?:\s+(?:there|in\s+there|inside))?" + _END, r"check \g<p>"),
    (r"\b(?:see|tell\s+me|report)\s+what\s+is\s+(?:in|at|inside)\s+(?=the\s)", "check "),
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>" + _PLACE + r")\s*,\s*(?:and\s+)?(?:have|take)\s+a\s+(?:qu"
                                                     r"ick\s+|little\s+|proper\s+|good\s+)?"
     r"look(?:\s+around|\s+round|\s+inside)?" + _END, r"check \g<p>"),
    (r"\bgo\s+to\s+(?P<p>" + _PLACE + r")\s+and\s+(?:have|take)\s+a\s+(?:quick\s+|little\s+|proper"
                                      r"\s+|good\s+)?(?:look|peek|"
     r"glance|look\s+around)(?:\s+(?:around|round|there|inside))?" + _END, r"check \g<p>"),
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>" + _PLACE + r")\s+and\s+(?:look|poke|nose|scout)\s+(?:"
     r"around|round|about|inside)(?:\s+(?:there|in\s+there))?" + _END, r"check \g<p>"),
    (r"\blook\s+for\s+(?P<t>" + _THING + r")\s+in\s+(?P<p>" + _PLACE + r")\s+and\s+(?P<t2>" + _THING
     + r")\s+in\s+(?P<p2>" + _PLACE + r")" + _END, r"look for \g<t> in \g<p>, then look for \g<t2> "
                                                   r"in \g<p2>"),
    (r"\b(is|are)\s+(still\s+)?(?:lying|sitting|standing|kept|left|parked|hanging)\s+(?=(?:in|at|"
     r"inside)\s)", r"\1 \2"),
    # questions from memory said other ways
    (r"^(?:any\s+idea|do\s+you\s+(?:know|remember|recall))\s+where\s+(?P<t>" + _THING
     + r")\s+(?:was|were)\s+(?:(?:the\s+)?last\s+time|when)\s+you\s+(?:last\s+)?(?:saw|spotted|noti"
     r"ced)\s+(?:it|them)"
     r"\s*\??$",
     r"where did you last see \g<t>?"),
    (r"^(?:is\s+there\s+)?(?:anything|something)\s+(?:different|new)(?:\s+(?:around|in|at)\s+(?:the\s"
     r"+)?[a-z]+)?(?=\s+since\b|\s*\??$)", "what has changed"),
    (r"^when\s+you\s+last\s+(?:looked|checked)\s*,\s*where\s+(?:was|were)\s+(?P<t>" + _THING
     + r")\s*\??$", r"where did you last see \g<t>?"),
    (r"^when\s+you\s+last\s+saw\s+(?P<t>" + _THING + r")\s*,\s*where\s+(?:was|were)\s+(?:it|they)"
     r"\s*\??$", r"where did you last see \g<t>?"),
    (r"^(?:do|did)\s+you\s+(?:remember|recall|know)\s+where\s+(?P<t>" + _THING + r")\s+(?:was|were|"
     r"last\s+was)(?:\s+last)?\s*\??$", r"where did you last see \g<t>?"),
    (r"^(?P<v>was|were)\s+(?P<t>" + _THING + r")\s+(?:still\s+)?(?P<w>in|at|inside)\s+(?P<p>"
     + _PLACE
     + r")\s+(?:the\s+)?last\s+time\s+you\s+(?:looked|checked|were\s+there|went\s+there)\s*\??$",
     r"is \g<t> \g<w> \g<p>?"),
    (r"\byou\s+last\s+(?:noticed|glimpsed|caught\s+sight\s+of|came\s+across|observed)\b",
     "you last saw"),
    # "is there a cup in the hall? go and check": a look there
    (r"^is\s+there\s+(?P<t>" + _THING + r")\s+(?:in|at|inside)\s+(?P<p>" + _PLACE + r")\s*\?\s*"
     r"(?:(?:go|come)\s+(?:and\s+)?)?(?:check|see|look|find\s+out)(?:\s+(?:please|for\s+me))?$",
     r"look for \g<t> in \g<p>"),
    # "see if there is a cup in the hall", "check whether the cup is still in the hall": said
    # to the robot as a thing to do, it is a look there (asked, "tell me whether", "do you
    # know whether", it is a question answered from memory, below)
    (_CLAUSE + r"(?:see|check|find\s+out)\s+(?:whether|if)\s+(?:there\s+(?:is|are)\s+)?(?P<t>"
     + _THING + r")\s+(?:(?:is|are)\s+)?(?:still\s+)?(?:anywhere\s+)?(?:in|at|inside)\s+(?P<p>"
     + _PLACE + r")" + _END, r"\1look for \g<t> in \g<p>"),
    (r"\b(?:see|check|find\s+out|tell\s+me|let\s+me\s+know|i\s+wonder|i\s+am\s+wondering|do\s+you\s"
     r"+"
     r"know|do\s+you\s+happen\s+to\s+know)\s+(?:whether|if)\s+(?P<t>" + _THING
     + r")\s+(?:is|are)\s+(?P<r>(?:still\s+)?(?:in|at|inside)\s)", r"is \g<t> \g<r>"),
    (r"\b(?:see|check|find\s+out|tell\s+me|let\s+me\s+know|i\s+wonder|i\s+am\s+wondering|do\s+"
     r"you\s+know)\s+(?:whether|if)\s+there\s+(is|are)\s+",
     r"is there "),
    (r"\b(find|fetch|locate|get)\s+me\s+", r"\1 "),
    (r"\bgo\s+(?:looking|searching|hunting)\s+for\s+", "look for "),
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>" + _PLACE + r")\s+(?:and|to)\s+(?:look|search|check)\s+"
     r"(?:around"
                                                     r"\s+)?for\s+"
     r"(?P<t>" + _THING + r")(?:\s+(?:there|in\s+there))?" + _END, r"look for \g<t> in \g<p>"),
    (r"\b(?:the\s+(?:place|spot)\s+(?:where\s+)?)?you\s+(?:saw|spotted|noticed)\s+(?P<t>" + _THING
     + r")\s+(?:most\s+recently|last)\b", r"the place you last saw \g<t>"),
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>" + _PLACE + r")\s+and\s+see\s+(?:if|whether)\s+(?:you\s+"
     r"can\s+)?(?:spot|find|see)\s+(?P<t>" + _THING + r")(?:\s+(?:there|in\s+there))?" + _END,
     r"look for \g<t> in \g<p>"),
    (r"[.?!]?\s*anywhere(?:\s+(?:in|around|at)\s+(?:the\s+)?[a-z]+)?\s+(?:is\s+fine|will\s+do|works|i"
     r"s\s+ok(?:ay)?)\s*[.!]?$", ""),
    (_CLAUSE + r"see\s+(?:if|whether)\s+you\s+can\s+(?:spot|find|see)\s+(?P<t>" + _THING + r")\s+(?"
                                                                                           r":in|at"
                                                                                           r"|"
     r"inside)\s+(?P<p>" + _PLACE + r")" + _END, r"\1look for \g<t> in \g<p>"),
    (r"^(?:i|we)\s+(?:have|had)\s+(?:lost(?:\s+track\s+of)?|misplaced|mislaid)\s+(?P<t>" + _THING
     + r")(?:\s+(?:somewhere(?:\s+(?:in|around|on)\s+(?:the\s+)?[a-z]+(?:\s+[a-z]+)?)?|again))*\s*["
                                                                           r",;.]\s*"
     r"(?:so\s+)?(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:find|locate|l"
     r"ook\s+for|hunt"
     r"|track)\s+"
     r"(?:it|them)(?:\s+down)?(?:\s+(?:for\s+me|please))?\s*\??$", r"find \g<t>"),
    (r"\bwherever\b", "where"),
    (r"\b(?:hunt|track|seek|search)\s+(?:down|out)\s+|\bgo\s+(?:and\s+)?find\s+|\bhunt\s+for\s+"
     r"(?=" + _THING + _END + ")", "find "),
    # conditions
    (r"\bshould\s+(?P<t>" + _THING + r")\s+be\s+(?:missing|absent|gone)\s+from\s+",
     r"if \g<t> is not in "),
    (r"\bshould\s+(?P<t>" + _THING + r")\s+(?:not\s+be|be\s+not)\s+(?=in\s|at\s)",
     r"if \g<t> is not "),
    (r"\bshould\s+(?P<t>" + _THING + r")\s+be\s+(?=in\s|at\s)", r"if \g<t> is "),
    (r"\b(is|are)\s+(?:missing|absent|gone)\s+from\s+", r"\1 not in "),
    (r"\b(is|are)\s+(?:nowhere\s+to\s+be\s+(?:seen|found)|not\s+to\s+be\s+found)\s+in\s+",
     r"\1 not in "),
    (r"[;,]\s*(?:and\s+)?(?:if\s+(?:it|they)\s+(?:is|are)\s+not|if\s+not|and\s+if\s+not)"
     r"(?:\s+there)?\s*[,;]?\s*(?:then\s+)?", ", otherwise "),
    (r"^(?:only\s+)?(?P<a>(?:go|check|look|dock|find)\b[^,;]*?)\s+(?:only\s+)?(?:if|when)\s+"
     r"(?P<c>(?:the|there|a|an|you)\b[^,;]+)$", r"if \g<c>, \g<a>"),
    # constraints
    (r"\b(?:but\s+)?not\s+(?:going\s+)?(?:through|via|by\s+way\s+of|past|across|using)\s+",
     "but avoid "),
    (r"\b(?:going|driving|getting|coming)\s+(?:anywhere\s+|too\s+|at\s+all\s+)?near\s+",
     "going through "),
    (r"^(?P<a>(?:avoid|avoiding|skip|bypass)\s+[^,;]+?)\s+(?:while|as|when)\s+you\s+(?:get|go|head|"
     r"drive|travel|make\s+your\s+way)\s+(?:over\s+)?(?:to|into)\s+(?P<p>[^,;]+)$",
     r"go to \g<p>, \g<a>"),
    (r"^(?P<a>(?:avoid|stay\s+out\s+of|keep\s+out\s+of|keep\s+away\s+from|stay\s+away\s+from|steer"
     r"\s+clear\s+of)"
     r"\s+[^,;]+?)\s+(?:while|as|when)\s+you\s+(?P<v>check|inspect|visit|search|look\s+in|look\s+for|f"
     r"ind|go\s+to|head\s+to|drive\s+to)\s+(?P<p>"
     r"[^,;]+)$",
     r"\g<v> \g<p>, \g<a>"),
    (r"\b(?:taking\s+care|being\s+careful|making\s+sure)\s+(?:not\s+to|to\s+not|never\s+to|that\s+"
     r"you\s+(?:do\s+not|never))\s+(?:enter|use|cross|go\s+(?:through|into|via)|pass\s+(?:through|"
     r"by)|drive\s+(?:through|into))\s+", "avoiding "),
    # "the kite has gone missing again, ... find it": the thing, then what to do
    (r"^(?P<t>" + _THING + r")\s+(?:has|have|is|are)\s+(?:gone\s+)?(?:missing|disappeared|vanished|"
     r"walked\s+off|wandered\s+off)\b[^?]*?\bfind\s+(?:it|them)$", r"find \g<t>"),
    # "where did you last see the kite? After you've told me, check the dome": said in order
    (r"(?<=[.?!])\s*(?:after|once|when)\s+you\s+(?:have\s+)?(?:told\s+me|tell\s+me|answered(?:\s+th"
     r"at)?|answer|said|replied)\s*,?\s*", " "),
    (r"(?<=[.?!])\s*(?:after|once|when)\s+you\s+have\s+(?:told\s+me|answered(?:\s+that)?|said|rep"
     r"lied)\s*,?\s*", " "),
    # "see if the kite is in the orrery? Have a proper look round": how to look
    (r"(?P<a>\blook\s+for\s+[^.?!]+?)\s*[.?!]\s*(?:and\s+)?(?:have|take|do)\s+a\s+(?:proper|good|tho"
     r"rough|careful|real|decent|full)\s+(?:look|search|hunt)(?:\s+(?:round|around|about))?$",
     r"\g<a>"),
)
# a first sentence that asks nothing (a story: "someone said the cellar smells"), up to a name
_STORY = (r"^(?![^.?!]*\b(?:go|find|check|look|search|drive|head|visit|inspect|avoid|return|dock)"
          r"\b)[^.?!]*?")
# the story names a place ({P}) and ends; the request follows
_STORY_PLACE = _STORY + r"\b(?P<p>{P})\b[^.?!]*[.!;]\s*"
_GO_THERE = (r"(?:[^.?!]*?\b)?(?:make\s+your\s+way|go|head|drive|get|come|pop|nip|swing)\s+(?:over"
             r"\s+)?there")

#: rows read after :data:`PHRASES` that need the map's own place names (``{P}``: one place,
#: "the" optional), so a place is never taken to run on into the next word
MAP_PHRASES: tuple[tuple[str, str], ...] = (
    (r"\bcheck\s+(?:up\s+)?on\s+(?={P}\b)", "check "),  # "check on lemur island"
    # "I'm waiting for you in the lobby, could you come over?": go there
    (r"^(?:i\s+am|we\s+are)\s+(?:waiting|standing|sitting)\s+(?:for\s+you\s+)?(?:in|at|by)\s+(?P<p>{P"
     r"})\b[^.?!]*?[,.;]\s*(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:come(?:\s+over|\s+h"
     r"ere|\s+and\s+(?:find|join|meet)\s+(?:me|us))?|join\s+(?:me|us)|meet\s+(?:me|us)(?:\s+there)?)"
     r"(?:\s+please)?\s*[.?!]?$", r"go to \g<p>"),
    (r"\bboth\s+(?={P}\s*,?\s+and\s)", ""),  # "avoid both the lab and the hall"
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>{P})\s*,?\s+and\s+look\s+for\s+(?P<t>" + _THING
     + r")\s+in\s+it\b", r"look for \g<t> in \g<p>"),
    # "the atrium floor has just been mopped, so keep out of there": there is that place
    (r"^(?P<s>[^.?!]*?\b(?P<p>{P})\b[^.?!]*?)\s*,?\s*(?:so\s+)?(?:please\s+)?(?P<v>avoid|keep\s+out\s+"
     r"of|stay\s+out\s+of|keep\s+away\s+from|stay\s+away\s+from|steer\s+clear\s+of)\s+(?:there|it|"
     r"that\s+(?:room|place|area))(?=\s*(?:[.;,!]|$))", r"\g<v> \g<p>"),
    # "go to the den and search it for the cup": "it" is the place
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>{P})\s*,?\s+and\s+(?:search|check|sweep|comb|look\s+(?:in|"
     r"through|around|round))\s+it\s+for\s+(?P<t>" + _THING + r")", r"look for \g<t> in \g<p>"),
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>{P})\s*,?\s+and\s+(?:search|check|inspect|look\s+(?:in|"
     r"around|round))\s+it\b", r"check \g<p>"),
    # "I think the dog wandered down into the cellar. Look for it there": the thing went there
    (r"^(?:[^?]*?\b)?(?P<t>" + _THING + r")\s+(?:has\s+|had\s+|may\s+have\s+|might\s+have\s+|must\s"
     r"+have\s+)?(?:wandered|went|gone|ran|run|walked|moved|headed|crawled|rolled|ended\s+up|got|sli"
     r"pped)\s+(?:off\s+|down\s+|up\s+|over\s+|back\s+)?(?:into|to|in|at|inside)\s+(?P<p>{P}|the\s+["
     r"a-z][\w-]*(?:\s+[a-z][\w-]*)?)(?=[\s,.;!?]|$)[^?!]*?[,.;]\s*(?:so\s+)?(?:go\s+(?:and\s+)?)?"
     r"(?:(?:look|search|check|hunt)\s+for|find)\s+(?:it|them)(?:\s+(?:there|in\s+there))?\s*\??$",
     r"look for \g<t> in \g<p>"),
    # "she left her umbrella somewhere backstage. Look for it in the den": a story names the
    # thing, the request after it says "it" ({T}: a colour block or an object of the map)
    (_STORY + r"\b(?:the|a|an|my|her|his|their|our|your)\s+(?P<n>{T})\b[^.?!]*[.!;]\s*(?P<r>(?:"
     r"[^.?!]*?\s)?)(?P<v>look\s+for|search\s+for|find|check\s+for|hunt\s+for)\s+(?:it|them)\b",
     r"\g<r>\g<v> the \g<n>"),
    (r"\b(?:go|drive|head)\s+to\s+(?P<p>{P})\s+and\s+(?:look|search|hunt)\s+for\s+(?P<t>" + _THING
     + r")" + _END, r"look for \g<t> in \g<p>"),
    # "avoid the atrium today": when is not where
    (r"\b(?P<p>{P})\s+(?:today|tonight|this\s+(?:morning|afternoon|evening|time)|for\s+now|for\s+t"
     r"he\s+moment|right\s+now|at\s+the\s+moment)\b", r"\g<p>"),
    (r"\bi\s+would\s+(?:rather|prefer(?:\s+it\s+if)?)\s+you\s+(?:did\s+not|do\s+not|not|never)\s+(?"
     r":go|pass|drive|travel|cut|come)\s+(?:through|into|via|past|near|by|across)\s+(?P<p>{P})\b",
     r"avoid \g<p>"),
    # "I think I left the kite somewhere in the orrery yesterday, look for it there": the
    # story says where; the request says what to do there
    (r"^(?:[^?]*?\b)?(?:left|put|dropped|stashed|stored|placed|parked|last\s+saw|saw)\s+(?P<t>"
     + _THING + r")\s+(?:somewhere\s+)?(?:(?:up|down|over|out|back)\s+)?(?:in|at|inside|around|near"
     r"|by)\s+(?P<p>{P})\b[^?!]*?[,.;]\s*(?:so\s+)?(?:go\s+(?:and\s+)?)?(?:(?:(?:look|search|check|"
     r"hunt)\s+for|find)\s+(?:it|them)(?:\s+(?:there|in\s+there))?|(?:look|search|check)\s+(?:there|"
     r"in\s+"
     r"there)\s+for\s+(?:it|them))\s*\??$",
     r"look for \g<t> in \g<p>"),
    # "I'm meeting someone at the ski school. Can you make your way there?": the story's place
    (_STORY_PLACE + _GO_THERE + r"\s+and\s+(?:have|take)\s+a\s+(?:quick\s+)?look(?:\s+around|\s+ro"
     r"und)?", r"check \g<p>"),
    (_STORY_PLACE + r"(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:check|inspect|look\s+"
     r"at)\s+(?:it|that)(?:\s+out)?(?:\s+please)?\s*[.?!]?$", r"check \g<p>"),
    (_STORY_PLACE + _GO_THERE + r"\b", r"go to \g<p>"),
)
_COMPILED = tuple((re.compile(p, re.I), r) for p, r in PHRASES)
_CONTRACTED = tuple((re.compile(p, re.I), r) for p, r in CONTRACTIONS)


def _bag(text: str, colours: Sequence[str], waypoints: Sequence[str],
         objects: Sequence[str]) -> list[str]:
    """The names ``text`` says, sorted (a rewrite may reorder steps, never change a name)."""
    return sorted(n for names in names_in(text, colours, waypoints, objects) for n in names)


@functools.lru_cache(maxsize=16)
def _map_rows(alts: str, things: str) -> tuple[tuple[re.Pattern[str], Any], ...]:
    """:data:`PHRASES` with a generic place also matching the map's own names (``alts``: a place
    of three words is one place), then :data:`MAP_PHRASES` on those names and ``things``;
    compiled once per map and vocabulary, not once per instruction."""
    place = rf"(?:the\s+)?(?:{alts})"
    either = rf"(?:the\s+)?(?:{alts}|[a-z][\w-]*(?:\s+[a-z][\w-]*)?)"
    rows = [(re.compile(p.replace(_PLACE, either), re.I), r) if _PLACE in p else c
            for (p, r), c in zip(PHRASES, _COMPILED, strict=True)]
    rows += [(re.compile(p.replace("{P}", place).replace("{T}", f"(?:{things or '(?!)'})"), re.I),
              r) for p, r in MAP_PHRASES]
    return tuple(rows)


def canonical(text: str, colours: Sequence[str], waypoints: Sequence[str],
              objects: Sequence[str] = ()) -> str:
    """``text`` with every phrasing of :data:`PHRASES` rewritten (the names it says kept: a
    rewrite that would add or drop one is skipped)."""
    t = text
    for rx, to in _CONTRACTED:
        t = rx.sub(to, t)
    if waypoints:  # "on the footbridge", "onto the forecourt": in / to that place, as said of any
        alts = "|".join(re.escape(w).replace("_", "[ _]") for w in sorted(waypoints, key=len,
                                                                             reverse=True))
        t = re.sub(rf"(?<!\bcheck )(?<!\bchecking )(?<!\bup )\b(?:on|onto)\s+"
                   rf"(?=(?:the\s+)?(?:{alts})\b)",
                   "in ", t, flags=re.I)  # "check on the lab" / "check up on" keep their "on"
    things = "|".join(re.escape(n) for n in sorted(  # every thing by name, longest first
        [*objects, *(f"{c} block" for c in colours)], key=len, reverse=True))
    if things:  # "is my handbag in the den?": whose it is does not change where
        t = re.sub(rf"\b(?:my|our|his|her|their)\s+(?=(?:{things})\b)", "the ", t, flags=re.I)
    t = re.sub(r"\b(\w+s)'(?=\s)", r"\1", t)  # "the porters' lodge": the porters lodge
    for p in waypoints:  # "the rare books room" for the place "rare_books": the place
        words = p.replace("_", " ").split()
        said_as = r"\s+".join(map(re.escape, words))
        extra = [g for g in _KIND_WORDS if words[-1].lower() != g
                 and not any(w.lower().replace("_", " ") == f"{' '.join(words)} {g}".lower()
                             for w in waypoints)]
        if extra:
            t = re.sub(rf"\b({said_as})\s+(?:{'|'.join(extra)})\b", r"\1", t, flags=re.I)
    if waypoints:  # "the flamingo lagoon ... go to the lagoon": the one said in full
        said_wp = [p.lower().replace("_", " ").split()
                   for p in names_in(t, colours, waypoints, objects)[1]]
        for words in said_wp:
            for k in range(len(words) - 1, 0, -1):  # "the dressing room", then "the room"
                if sum(w[-k:] == words[-k:] for w in said_wp) == 1:
                    t = re.sub(r"\bthe\s+" + r"\s+".join(map(re.escape, words[-k:])) + r"\b",
                               "the " + " ".join(words), t, flags=re.I)
    said = _bag(t, colours, waypoints, objects)
    for rx, to in _map_rows(alts, things) if waypoints else _COMPILED:
        new = " ".join(rx.sub(to, t).split()).strip(" ,;.!")
        if new != t and _bag(new, colours, waypoints, objects) == said:
            t = new
    return t
