#!/usr/bin/env python3
"""make_corpus.py OUT.jsonl [NDOCS [SEED]]: a deterministic synthetic English-like corpus
for the demo: short stories from a small grammar, one {"text": ...} per line.

Made here so that the demo needs nothing from outside the repository. The grammar is
small enough that a model of a few hundred thousand parameters learns it in a minute,
and structured enough that learning shows: a story keeps its hero's name and pronoun,
its animal and its object from sentence to sentence, dialogue opens and closes its
quotes, and each story ends with one of a few endings. The same NDOCS and SEED give the
same bytes (Python's random.Random is stable across versions for these calls).
Not here: tokenizing (pipelines/make_tokenizer.py learns a tokenizer from this text).
"""
import json
import os
import random
import sys

PEOPLE = [("Tom", "he"), ("Lily", "she"), ("Ben", "he"), ("Mia", "she"), ("Sam", "he"),
          ("Anna", "she"), ("Max", "he"), ("Zoe", "she"), ("Leo", "he"), ("Emma", "she"),
          ("Jack", "he"), ("Lucy", "she"), ("Tim", "he"), ("Sara", "she"), ("Bob", "he"),
          ("Kim", "she")]
ANIMALS = ["cat", "dog", "bird", "fish", "frog", "bunny", "bear", "duck", "mouse", "horse",
           "owl", "fox"]
PLACES = ["park", "garden", "forest", "river", "house", "beach", "school", "farm", "hill",
          "lake", "shop", "zoo"]
THINGS = ["ball", "kite", "box", "hat", "cake", "book", "toy", "flower", "car", "drum",
          "boat", "cup"]
FEELINGS = ["happy", "sad", "tired", "excited", "scared", "proud", "hungry", "sleepy",
            "angry", "curious"]
ADJS = ["red", "blue", "green", "yellow", "big", "small", "shiny", "soft", "old", "funny"]
WEATHER = ["sunny", "rainy", "windy", "cold", "warm", "cloudy"]
TIMES = ["One day", "One morning", "Once upon a time", "Last summer", "On a {w} day"]


def story(r):
    (a, pa), (b, pb) = r.sample(PEOPLE, 2)
    an, pl, pl2 = r.choice(ANIMALS), *r.sample(PLACES, 2)
    th, fe, fe2, co = r.choice(THINGS), *r.sample(FEELINGS, 2), r.choice(ADJS)
    Pa = pa.capitalize()
    his = "his" if pa == "he" else "her"
    when = r.choice(TIMES).format(w=r.choice(WEATHER))
    s = [f"{when}, {a} went to the {pl}."]
    s.append(r.choice([f"{Pa} saw a {co} {an} near a {th}.",
                       f"There {a} found a {co} {th}.",
                       f"{Pa} had a {co} {th} in {his} hand."]))
    for _ in range(r.randint(1, 4)):
        s.append(r.choice([
            f"The {an} was {fe}.",
            f"{a} felt {fe} and looked at the {an}.",
            f"{a} said, \"Hello, {an}! Do you want to play with my {th}?\"",
            f"The {an} said, \"Yes, {a}! I like your {th}.\"",
            f"{b} came and asked, \"Can I play too?\"",
            f"{a} said, \"Yes, {b}. We can share the {th}.\"",
            f"{Pa} gave the {th} to the {an}.",
            f"The {an} took the {th} and ran to the {pl2}.",
            f"{a} and {b} looked for the {th} in the {pl2}.",
            f"It was {r.choice(WEATHER)}, so {pa} went home to get {his} coat.",
            f"{Pa} was {fe2} because the {th} was {co}.",
            f"{a} counted {r.randint(2, 9)} {an}s by the {pl}.",
        ]))
    s.append(r.choice([f"They played all day and were very {fe2}.",
                       f"At the end of the day, {a} went home with the {th}.",
                       f"{a} and {b} became good friends.",
                       f"The {an} was not {fe} anymore.",
                       f"{a} learned that it is good to share."]))
    s.append("The end.")
    return " ".join(s)


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    r = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1234)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(json.dumps({"text": story(r)}) + "\n")
    os.replace(tmp, out)  # atomic, so a make target is never a half file


if __name__ == "__main__":
    main()
