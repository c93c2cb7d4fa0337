#!/usr/bin/env python3
"""make_corpus.py OUT.jsonl [NDOCS]: a deterministic synthetic English-like corpus for
the demo: short stories from a small grammar, varied enough that a tiny model can
learn something, made here so the demo needs nothing from outside the repository."""
import json, random, sys

random.seed(1234)
names = ["Tom", "Lily", "Ben", "Mia", "Sam", "Anna", "Max", "Zoe"]
animals = ["cat", "dog", "bird", "fish", "frog", "bunny", "bear", "duck"]
places = ["park", "garden", "forest", "river", "house", "beach", "school", "farm"]
things = ["ball", "kite", "box", "hat", "cake", "book", "toy", "flower"]
feel = ["happy", "sad", "tired", "excited", "scared", "proud", "hungry", "sleepy"]
colors = ["red", "blue", "green", "yellow", "big", "small", "shiny", "soft"]


def story():
    a, b = random.sample(names, 2)
    an, pl, th, fe, co = (random.choice(x) for x in (animals, places, things, feel, colors))
    s = [f"Once upon a time, {a} went to the {pl}.",
         f"{a} saw a {co} {an} near a {th}.",
         f"The {an} was {fe}.",
         random.choice([f"{a} said, \"Hello, {an}! Do you want to play with my {th}?\"",
                        f"{a} gave the {th} to the {an}.",
                        f"{b} came and asked, \"Can I play too?\""]),
         random.choice([f"They played all day and were very {fe}.",
                        f"The {an} ran to the {random.choice(places)}.",
                        f"{a} and {b} became good friends."]),
         "The end."]
    return " ".join(s)


out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
with open(out, "w", encoding="utf-8") as f:
    for _ in range(n):
        f.write(json.dumps({"text": story()}) + "\n")
