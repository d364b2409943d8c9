"""Units that say nothing about the product or the purchase, never chosen for a summary.

A summary is read to learn what the product is like. Some review text carries no such claim
whatever else it does: it defers the review ("还没有装，用了再来评价", "haven't tried it yet, will
update"), greets or thanks ("谢谢", "hello"), addresses other buyers instead of describing the
product ("亲们", "大家", "fellow buyers"), or fills a length requirement ("凑字数", "默认好评").
These four kinds were written down from what a review is for, before looking at any data, and
are kept small and general on purpose; they were not fitted to the reference summaries (the dev
figures in docs/summarize.md were measured after writing them, once).

Such units still count as what reviewers wrote (their attention and mass are unchanged); they are
only never picked.
"""

from __future__ import annotations

import re

# Deferred: the reviewer has not used the product yet, or promises a review later.
_DEFERRED = (r"还没(?:有)?(?:开始)?(?:用|使用|装|安装|试|试用|穿|吃|喝|看|读|拆|收到|到货)"
             r"|(?:用|试|穿|吃|看|装)(?:了|过|完)(?:一段时间)?(?:以?后)?再(?:来)?(?:评|说|追评)|以后再(?:来)?评|再来(?:追)?评"
             r"|追评|先(?:给)?(?:个)?好评|暂(?:时)?不(?:做)?评"
             r"|\b(?:have ?n[o']t|not)\s+(?:yet\s+)?(?:used|tried|opened|installed|worn)\b"
             r"|\bwill\s+(?:update|review|report back)\b|\bupdate\s+(?:later|soon)\b")
# Greetings and thanks, and words addressed to other buyers.
_SOCIAL = (r"你好|您好|谢谢|感谢|辛苦了|亲们|大家|各位|朋友们|楼主|买家们"
           r"|\b(?:hello|hi all|thank you|thanks|fellow (?:buyers|shoppers)|everyone)\b")
# Filler written to reach a length or left by the site.
_FILLER = r"凑字数|凑够|字数|默认好评|此用户|未填写|没有填写"

NON_PRODUCT = re.compile("|".join((_DEFERRED, _SOCIAL, _FILLER)), re.I)


def is_uninformative(text: str) -> bool:
    """Whether ``text`` is one of the kinds above (defers, greets/addresses, or fills)."""
    return bool(NON_PRODUCT.search(text.replace("’", "'")))
