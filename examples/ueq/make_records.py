"""Generate examples/ueq/records.jsonl: synthetic personalised UX questionnaires to judge.

24 users x 2 conditions = 48 records:

* ``UEQ-mLLM``: a questionnaire personalised to the user (their product, devices, tasks, goals,
  accessibility needs and current state), as a multimodal LLM given the user's information and
  state would write it.
* ``UEQ-sLLM``: a generic questionnaire from one bank of generic questions with mild variation,
  as a standard LLM without the user's information would write it.

Both conditions carry planted imperfections of the kinds real generators produce, more of them in
``UEQ-sLLM``. Every record lists its imperfections in ``defects`` so a reader can audit the data:

* ``few_questions:<facet>``          the facet has only 3 or 4 questions
* ``misfiled:<from>-><to>``          a question that clearly belongs to facet <from> is filed
                                     under facet <to>
* ``misstates_user:<facet>``         (mLLM only) a question under <facet> assumes something about
                                     the user that their information does not say (wrong device,
                                     age group, occupation, product or condition)
* ``spelling:<facet>``               one misspelt word in a question under <facet>
* ``grammar:<facet>``                one grammatical slip (agreement) in a question under <facet>
* ``uncategorised:<n>``              <n> questions under a heading that is not one of the facets
* ``literal_braces:<facet>``         questions under <facet> contain literal template-like
                                     braces ("{{user_info}}", "{name}") that must reach the judge
                                     unchanged

Standard library only and deterministic (``random.Random(2024)``): running this script rewrites
records.jsonl byte-identically.

    python examples/ueq/make_records.py
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent / "records.jsonl"
SEED = 2024

FACETS = ["useful", "usable", "desirable", "findable", "accessible", "credible", "valuable"]

# How many records of each condition get each planted imperfection.
PLAN = {
    "UEQ-mLLM": {
        "few_questions": 2,
        "misfiled": 2,
        "misstates_user": 5,
        "slip": 2,
        "uncategorised": 0,
        "literal_braces": 1,
    },
    "UEQ-sLLM": {
        "few_questions": 5,
        "misfiled": 6,
        "misstates_user": 0,
        "slip": 4,
        "uncategorised": 2,
        "literal_braces": 0,
    },
}

# ---------------------------------------------------------------------------------------------
# Users. Slots fill the personalised question templates below; "extra" holds questions written
# for this user alone; "wrong" is a question that misstates the user (used only when planted).
# ---------------------------------------------------------------------------------------------

USERS = [
    {
        "info": "Margaret is a 67-year-old retired primary-school teacher who lives alone in a "
        "small market town. She uses a 10th-generation iPad with the system font set to the "
        "largest size and Zoom switched on, and she wears reading glasses. Mild arthritis makes "
        "her fingers stiff, so she prefers large buttons. Since her bank closed its local branch "
        "last year she uses the HomeBank app to check her balance, pay her utility bills and "
        "manage standing orders. Her goal is to handle her money on her own without travelling "
        "to the next town.",
        "state": "Sitting at her kitchen table in the evening, a little anxious because an "
        "electricity bill payment failed yesterday and she wants to check whether it has now "
        "gone through.",
        "role": "a retired teacher",
        "app": "the HomeBank app",
        "device": "your iPad",
        "tasks": [
            "checking your balance",
            "paying your electricity bill",
            "setting up a standing order",
        ],
        "feature": "the bill-payment screen",
        "content": "your balance and recent payments",
        "goal": "managing your money without visiting a branch",
        "situation": "when you are worried that a payment may have failed",
        "aid": "the largest font size and Zoom on your iPad",
        "need": "your need for large text and big buttons",
        "barrier": "the stiffness in your fingers",
        "data": "your account and card details",
        "cost": "the time it took you to set it up",
        "peer": "friends of your age who no longer have a local branch",
        "extra": [
            (
                "credible",
                "After yesterday's failed payment, how sure are you that the HomeBank "
                "app shows the real status of a transfer?",
            ),
            (
                "usable",
                "How easy is it to correct a mistyped account number before a payment is sent?",
            ),
        ],
        "wrong": (
            "usable",
            "How easy is it to approve payments with your fingerprint on your Android phone?",
        ),
    },
    {
        "info": "Jordan is a 24-year-old staff nurse who works 12-hour night shifts on a busy "
        "surgical ward. Jordan uses a Samsung Galaxy A54 Android phone and the FitTrack app to "
        "log runs, steps and sleep, and occasionally a cheap fitness band that syncs with it. "
        "Jordan has no accessibility needs but often uses the phone one-handed while commuting. "
        "The goal is to stay fit and sleep better despite rotating shifts.",
        "state": "Tired after a 12-hour night shift, checking last night's sleep score "
        "one-handed while standing on a crowded bus home.",
        "role": "a nurse working night shifts",
        "app": "FitTrack",
        "device": "your Android phone",
        "tasks": ["logging a run", "reviewing your sleep data", "setting a weekly step goal"],
        "feature": "the sleep summary",
        "content": "your sleep score and step count",
        "goal": "staying fit while working rotating night shifts",
        "situation": "when you are tired after a night shift",
        "aid": "one-handed use while you hold on to a bus rail",
        "need": "the fact that you often use your phone with one hand",
        "barrier": "having only one hand free on a moving bus",
        "data": "your health and sleep data",
        "cost": "the monthly premium subscription",
        "peer": "colleagues on your ward",
        "extra": [
            (
                "useful",
                "How well do FitTrack's sleep tips fit a schedule in which you sleep "
                "during the day?",
            ),
            (
                "accessible",
                "Can you read the sleep summary at a glance on a moving bus without zooming in?",
            ),
        ],
        "wrong": ("useful", "How well does FitTrack adjust running plans to your asthma?"),
    },
    {
        "info": "Aisha is a 31-year-old software tester who has been blind since birth. She uses "
        "an iPhone 14 with VoiceOver and sometimes a refreshable braille display. She orders "
        "meals and groceries with the QuickBite food-delivery app several times a week. Her goal "
        "is to order independently and to know exactly what she is buying, including allergens, "
        "without asking anyone for help.",
        "state": "At home on a weekday evening, ordering dinner with VoiceOver shortly after an "
        "app update moved several buttons on the checkout screen.",
        "role": "a software tester who relies on VoiceOver",
        "app": "QuickBite",
        "device": "your iPhone",
        "tasks": ["ordering dinner", "checking the allergens in a dish", "tracking your delivery"],
        "feature": "the checkout screen",
        "content": "the dish descriptions and allergen information",
        "goal": "ordering food independently",
        "situation": "right after an update has moved buttons around",
        "aid": "VoiceOver and your braille display",
        "need": "your reliance on VoiceOver",
        "barrier": "images or buttons without text labels",
        "data": "your payment details and home address",
        "cost": "the delivery fees",
        "peer": "other screen-reader users",
        "extra": [
            (
                "accessible",
                "Does VoiceOver announce the allergen information for each dish "
                "before you add it to your basket?",
            ),
            (
                "findable",
                "After the latest update, how easy is it to find the Place Order button "
                "by swiping through the checkout screen?",
            ),
        ],
        "wrong": (
            "accessible",
            "How easy is it to read the small print on the QuickBite menu with your glasses on?",
        ),
        # Aisha is blind: leave out templates that assume she sees the screen.
        "skip": [
            "look of",
            "visual style",
            "colour contrasts",
            "colours, icons",
            "text in",
            "text size",
            "size of the buttons",
        ],
    },
    {
        "info": "Tomasz is a 45-year-old long-distance lorry driver who spends four nights a "
        "week on the road across Europe. He uses the TruckRoute navigation app on an Android "
        "phone mounted in his cab, connected to Android Auto. He has mild hearing loss in his "
        "left ear, so he turns voice guidance up loud. His goals are to avoid low bridges and "
        "weight limits and to find a safe place to park overnight before his driving hours run "
        "out.",
        "state": "Parked at a motorway services at 10 pm, searching for a free, secure "
        "overnight spot with 40 minutes of driving time left.",
        "role": "a long-distance lorry driver",
        "app": "TruckRoute",
        "device": "your phone in the cab",
        "tasks": [
            "finding overnight parking",
            "planning a route around low bridges",
            "checking your remaining driving time",
        ],
        "feature": "the truck-parking map",
        "content": "parking availability and height restrictions",
        "goal": "reaching safe overnight parking before your driving hours run out",
        "situation": "when your driving hours are almost used up",
        "aid": "loud voice guidance through Android Auto",
        "need": "your hearing loss in one ear",
        "barrier": "road noise in the cab",
        "data": "your location history and routes",
        "cost": "the annual licence fee",
        "peer": "other drivers at your company",
        "extra": [
            (
                "credible",
                "How much do you trust TruckRoute's warnings about low bridges and "
                "weight limits on routes you do not know?",
            ),
            (
                "useful",
                "Does TruckRoute tell you whether a parking area is secure and has "
                "showers before you drive there?",
            ),
        ],
        "wrong": (
            "useful",
            "How well does TruckRoute help you plan cycling routes to your office?",
        ),
    },
    {
        "info": "Sophie is a 16-year-old secondary-school student with dyslexia. She uses a "
        "school Chromebook and her own iPhone, with a dyslexia-friendly font and text-to-speech "
        "switched on. She practises French with Duolingo every day because she has her GCSE "
        "French exam in the summer. Her goal is to learn vocabulary faster and feel less "
        "anxious about reading tasks.",
        "state": "Revising French vocabulary in bed late at night before a vocabulary test "
        "tomorrow, feeling stressed and tired.",
        "role": "a student preparing for an exam",
        "app": "Duolingo",
        "device": "your iPhone",
        "tasks": [
            "practising French vocabulary",
            "doing a listening exercise",
            "reviewing your mistakes",
        ],
        "feature": "the vocabulary practice",
        "content": "your lesson progress and weak words",
        "goal": "getting ready for your French exam",
        "situation": "when you are revising late at night before a test",
        "aid": "your dyslexia-friendly font and text-to-speech",
        "need": "your dyslexia",
        "barrier": "long blocks of text",
        "data": "your learning history",
        "cost": "the time you spend on it every day",
        "peer": "classmates taking the same exam",
        "extra": [
            (
                "accessible",
                "Can you have the French sentences read aloud whenever reading them feels hard?",
            ),
            (
                "valuable",
                "Has practising with Duolingo made you feel more confident about your French exam?",
            ),
        ],
        "wrong": ("valuable", "Is Duolingo worth the subscription that your employer pays for?"),
    },
    {
        "info": "Rajesh is a 52-year-old restaurant owner with type 2 diabetes. He wears a "
        "continuous glucose sensor that sends readings to the GlucoLog app on his Android "
        "phone. He works long, irregular hours in a hot kitchen and often forgets to eat. His "
        "goal is to keep his blood sugar stable through busy services and to share reports "
        "with his diabetes nurse.",
        "state": "In the middle of a busy lunch service, with greasy hands, glancing at a "
        "high-glucose alert on his phone.",
        "role": "a restaurant owner",
        "app": "GlucoLog",
        "device": "your Android phone",
        "tasks": [
            "checking your glucose level",
            "logging a meal",
            "sharing a report with your diabetes nurse",
        ],
        "feature": "the glucose alert",
        "content": "your glucose readings and trends",
        "goal": "keeping your blood sugar stable on long working days",
        "situation": "during a busy service in the kitchen",
        "aid": "quick glances and large alert messages",
        "need": "the fact that your hands are often busy or greasy",
        "barrier": "greasy or wet hands",
        "data": "your glucose readings and health records",
        "cost": "the time it takes to log your meals",
        "peer": "other people with diabetes who run a business",
        "extra": [
            (
                "usable",
                "How easy is it to silence a glucose alert during service without "
                "unlocking your phone?",
            ),
            (
                "credible",
                "How far do you trust GlucoLog's readings when deciding whether to "
                "eat something during service?",
            ),
        ],
        "wrong": (
            "accessible",
            "Does GlucoLog work well with the screen reader you use because of your sight loss?",
        ),
    },
    {
        "info": "Elena is a 38-year-old freelance graphic designer. She has red-green colour "
        "blindness (deuteranopia). She works on a MacBook Pro and uses the Spendly budgeting "
        "app on her iPhone and the web to track irregular client payments and business "
        "expenses. Her goal is to set aside enough money for her quarterly tax payments.",
        "state": "At her desk on a Sunday afternoon, matching last month's invoices against "
        "payments, relaxed but with only half an hour to spare.",
        "role": "a freelance designer",
        "app": "Spendly",
        "device": "your iPhone",
        "tasks": [
            "matching invoices to payments",
            "estimating your next tax payment",
            "categorising business expenses",
        ],
        "feature": "the monthly spending chart",
        "content": "your income, expenses and tax estimate",
        "goal": "putting aside enough for your quarterly tax bill",
        "situation": "when you only have half an hour to reconcile a month",
        "aid": "colour-blind-friendly chart colours",
        "need": "your red-green colour blindness",
        "barrier": "charts that use red and green to mean different things",
        "data": "your bank connections and income figures",
        "cost": "the yearly subscription",
        "peer": "other freelancers",
        "extra": [
            (
                "accessible",
                "Can you tell income from expenses in Spendly's charts without "
                "relying on red and green?",
            ),
            (
                "desirable",
                "As a designer, how much do you like the typography and layout of "
                "Spendly's reports?",
            ),
        ],
        "wrong": (
            "usable",
            "How easy is it for you to use Spendly on your Windows tablet with a stylus?",
        ),
    },
    {
        "info": "Walter is an 81-year-old retired engineer and widower. He uses a large Android "
        "tablet for video calls with his grandchildren in Canada through the FamilyCall app. "
        "He wears Bluetooth hearing aids and has a slight tremor in his right hand. His goal "
        "is to stay in touch with his family every week without needing help from his "
        "neighbour.",
        "state": "Waiting for a scheduled Sunday call from his granddaughter in Canada, worried "
        "that the sound will not connect to his hearing aids again.",
        "role": "a retired engineer",
        "app": "FamilyCall",
        "device": "your tablet",
        "tasks": [
            "answering a video call",
            "connecting your hearing aids",
            "calling your granddaughter",
        ],
        "feature": "the incoming-call screen",
        "content": "your contacts and scheduled calls",
        "goal": "staying in touch with your family in Canada",
        "situation": "while you wait for a call to come in",
        "aid": "your Bluetooth hearing aids",
        "need": "your hearing aids and the tremor in your hand",
        "barrier": "the tremor in your right hand",
        "data": "your contacts and call history",
        "cost": "the time it took to learn",
        "peer": "friends of your age with family abroad",
        "extra": [
            (
                "accessible",
                "Does the sound of a FamilyCall call come through your hearing aids "
                "every time, without you changing any settings?",
            ),
            (
                "usable",
                "How easy is it to hit the green answer button despite the tremor in your hand?",
            ),
        ],
        "wrong": (
            "usable",
            "How easy is it to join FamilyCall calls from your laptop during "
            "your lunch break at work?",
        ),
    },
    {
        "info": "Priya is a 29-year-old junior doctor in an acute medical unit. She uses an "
        "iPhone and an Apple Watch, and looks up drug doses and interactions in the MedRef "
        "app many times a shift. She has no accessibility needs. Her goal is to find reliable "
        "dosing information within seconds during ward rounds.",
        "state": "On a busy morning ward round, wearing gloves, needing to check a dose "
        "quickly between two patients.",
        "role": "a junior doctor",
        "app": "MedRef",
        "device": "your iPhone",
        "tasks": [
            "looking up a drug dose",
            "checking a drug interaction",
            "calculating a dose by body weight",
        ],
        "feature": "the interaction checker",
        "content": "dosing guidance and interaction warnings",
        "goal": "prescribing safely under time pressure",
        "situation": "while you are on a busy ward round",
        "aid": "use while wearing gloves",
        "need": "the fact that you often wear gloves",
        "barrier": "wearing gloves",
        "data": "your search history",
        "cost": "the subscription your hospital pays",
        "peer": "other junior doctors",
        "extra": [
            (
                "credible",
                "Does MedRef show which guideline and which date its dosing advice comes from?",
            ),
            ("findable", "How quickly can you find a drug when you only know its brand name?"),
        ],
        "wrong": (
            "credible",
            "How much do you trust MedRef to check interactions with your "
            "own blood-pressure medication?",
        ),
    },
    {
        "info": "Kwame is a 34-year-old delivery cyclist who works for several platforms, "
        "mostly through the RideDrop courier app on an Android phone fixed to his handlebars. "
        "He works outdoors in all weather, and the screen is often wet or in bright sun. He "
        "has no formal accessibility needs. His goals are to complete more orders per hour "
        "and to understand how his pay is calculated.",
        "state": "Waiting outside a restaurant in the rain for an order, with a wet phone "
        "screen and 15% battery left.",
        "role": "a delivery cyclist",
        "app": "RideDrop",
        "device": "your handlebar-mounted phone",
        "tasks": ["accepting an order", "navigating to a customer", "checking your earnings"],
        "feature": "the order-offer screen",
        "content": "order details and your earnings",
        "goal": "earning a fair income per hour",
        "situation": "while you wait in the rain with a low battery",
        "aid": "a wet touchscreen and gloves",
        "need": "the fact that you work outdoors in all weather",
        "barrier": "rain on the screen or bright sunlight",
        "data": "your location and earnings data",
        "cost": "the battery and mobile data it uses",
        "peer": "other couriers",
        "extra": [
            (
                "credible",
                "How clearly does RideDrop explain how the pay for each order is calculated?",
            ),
            (
                "usable",
                "How easy is it to accept an order with a wet screen before the offer runs out?",
            ),
        ],
        "wrong": ("usable", "How easy is it to accept orders from the driver's seat of your car?"),
    },
    {
        "info": "Helen is a 59-year-old secondary-school headteacher who also rents out a "
        "small flat. She files her self-assessment tax return once a year through the "
        "TaxOnline government portal on her Windows laptop. She has early macular "
        "degeneration in one eye and uses Windows Magnifier. Her goal is to file correctly "
        "and on time without paying an accountant.",
        "state": "Two days before the filing deadline, at home in the evening, unsure which "
        "section of the form her rental income belongs in.",
        "role": "a headteacher with a rental flat",
        "app": "the TaxOnline portal",
        "device": "your Windows laptop",
        "tasks": [
            "declaring your rental income",
            "saving a half-finished return",
            "checking what you owe",
        ],
        "feature": "the rental income section",
        "content": "your tax calculation and deadlines",
        "goal": "filing your tax return correctly and on time",
        "situation": "when the filing deadline is only two days away",
        "aid": "Windows Magnifier",
        "need": "the reduced vision in one of your eyes",
        "barrier": "small grey text on a white background",
        "data": "your income and tax details",
        "cost": "the evenings you spend on it",
        "peer": "colleagues who also rent out property",
        "extra": [
            (
                "findable",
                "How easy was it to find out which section of the return your rental "
                "income belongs in?",
            ),
            (
                "accessible",
                "Does the layout of the TaxOnline portal stay readable when you "
                "magnify it with Windows Magnifier?",
            ),
        ],
        "wrong": (
            "findable",
            "How easy is it to find the section for declaring your pension income as a retiree?",
        ),
    },
    {
        "info": "Lucas is a 22-year-old computer-science student with ADHD. He uses an "
        "Android phone and a gaming PC, and he listens to music on Spotify for most of the "
        "day, especially focus playlists while studying. Notifications and autoplay easily "
        "distract him. His goal is to use music to stay focused during revision sessions.",
        "state": "In the university library during exam week, trying to start a focus "
        "playlist without getting sidetracked by new releases.",
        "role": "a student with ADHD",
        "app": "Spotify",
        "device": "your Android phone",
        "tasks": [
            "starting a focus playlist",
            "blocking distracting notifications",
            "saving a playlist for offline use",
        ],
        "feature": "the home feed",
        "content": "your playlists and recommendations",
        "goal": "staying focused during revision sessions",
        "situation": "when you are trying to concentrate in the library",
        "aid": "settings that reduce notifications and autoplay",
        "need": "your tendency to get distracted by notifications",
        "barrier": "constant recommendations and pop-ups",
        "data": "your listening history",
        "cost": "the student subscription",
        "peer": "friends who also study with music",
        "extra": [
            (
                "accessible",
                "Can you turn off autoplay and new-release notifications so they do "
                "not break your concentration?",
            ),
            (
                "useful",
                "How well do Spotify's focus playlists help you stay on task for a full "
                "revision session?",
            ),
        ],
        "wrong": (
            "desirable",
            "How much do you enjoy Spotify's podcast recommendations for "
            "parents of young children?",
        ),
    },
    {
        "info": "Fatima is a 41-year-old accountant and mother of three. Two of her children "
        "have asthma. She uses the MediRefill repeat-prescription app on her iPhone to reorder "
        "their inhalers and to see when prescriptions are ready at the local pharmacy. She has "
        "no accessibility needs. Her goal is never to run out of an inhaler.",
        "state": "Standing in the school car park, trying to reorder her son's inhaler before "
        "the pharmacy closes in 30 minutes.",
        "role": "a working parent",
        "app": "MediRefill",
        "device": "your iPhone",
        "tasks": [
            "reordering an inhaler",
            "checking whether a prescription is ready",
            "managing your children's profiles",
        ],
        "feature": "the repeat-prescription list",
        "content": "prescription status and collection times",
        "goal": "making sure your children never run out of their inhalers",
        "situation": "when the pharmacy is about to close",
        "aid": "quick use on the go",
        "need": "the fact that you are often in a hurry",
        "barrier": "time pressure",
        "data": "your children's medical information",
        "cost": "the few minutes it takes to keep your children's profiles up to date",
        "peer": "other parents of children with asthma",
        "extra": [
            (
                "usable",
                "How quickly can you switch between your children's profiles to reorder "
                "the right inhaler?",
            ),
            (
                "credible",
                "Do you trust MediRefill to tell you the truth about when a "
                "prescription will be ready?",
            ),
        ],
        "wrong": (
            "useful",
            "How useful is MediRefill for managing your own insulin prescriptions?",
        ),
    },
    {
        "info": "George is a 73-year-old retired farmer who keeps a smallholding with "
        "vegetables and a few sheep. He uses a basic Android smartphone with a larger "
        "keyboard, and mobile signal on his land is patchy. He checks the AgriWeather app "
        "every morning for frost and rain warnings. He has arthritis in both hands. His goal "
        "is to plan planting and protect his crops from frost.",
        "state": "Out in his field early in the morning with a weak signal, checking whether "
        "frost is expected tonight.",
        "role": "a smallholder",
        "app": "AgriWeather",
        "device": "your smartphone",
        "tasks": [
            "checking tonight's frost risk",
            "reading the rain forecast",
            "setting a frost alert",
        ],
        "feature": "the frost warning",
        "content": "the frost and rain forecast",
        "goal": "protecting your crops from frost",
        "situation": "when you are out in the field with a weak signal",
        "aid": "the larger keyboard on your phone",
        "need": "the arthritis in your hands",
        "barrier": "a weak mobile signal",
        "data": "your location",
        "cost": "the mobile data it uses",
        "peer": "neighbours who also grow vegetables",
        "extra": [
            (
                "useful",
                "Does AgriWeather still show the latest forecast when you have no "
                "signal in the field?",
            ),
            (
                "credible",
                "How often has AgriWeather's frost warning matched what actually "
                "happened on your land?",
            ),
        ],
        "wrong": (
            "accessible",
            "Does AgriWeather read forecasts aloud for you, since you cannot see the screen?",
        ),
    },
    {
        "info": "Mei is a 27-year-old UX researcher who is deaf. She uses British Sign "
        "Language and relies on captions and transcripts. She takes an online data-analysis "
        "course on the LearnHub platform, on her iPhone during her commute and on her MacBook "
        "at home. Her goal is to complete the course and earn its certificate this year.",
        "state": "On a crowded train commute, watching a lecture video with captions and the "
        "sound off.",
        "role": "a UX researcher taking an online course",
        "app": "LearnHub",
        "device": "your iPhone",
        "tasks": ["watching a lecture", "taking a quiz", "downloading a transcript"],
        "feature": "the video player",
        "content": "lecture captions and transcripts",
        "goal": "finishing the course and earning the certificate",
        "situation": "while you are on a crowded train",
        "aid": "captions and transcripts",
        "need": "your reliance on captions rather than sound",
        "barrier": "videos without accurate captions",
        "data": "your course progress",
        "cost": "the course fee",
        "peer": "other deaf learners",
        "extra": [
            (
                "accessible",
                "How accurate are the captions on LearnHub's lecture videos, "
                "especially for technical terms?",
            ),
            (
                "desirable",
                "As a UX researcher, how much do you like the design of LearnHub's course pages?",
            ),
        ],
        "wrong": (
            "accessible",
            "How clear is the audio of LearnHub's lectures through your headphones on the train?",
        ),
    },
    {
        "info": "Oliver is a 35-year-old stay-at-home father of eight-month-old twins. He uses "
        "the HomeHub smart-home app on his Android phone to control the heating, lights and "
        "the baby-monitor cameras. He often has only one hand free. His goals are to cut the "
        "family's energy bills and to check on the twins without waking them.",
        "state": "Holding one of the twins in one arm at 3 am, trying to turn up the nursery "
        "heating with his free hand.",
        "role": "a parent of young twins",
        "app": "HomeHub",
        "device": "your Android phone",
        "tasks": [
            "changing the nursery temperature",
            "checking the baby monitor",
            "reviewing your energy use",
        ],
        "feature": "the baby-monitor view",
        "content": "room temperatures and energy use",
        "goal": "cutting your energy bills while keeping the twins comfortable",
        "situation": "when you are holding a baby at night",
        "aid": "one-handed use",
        "need": "the fact that you often have only one hand free",
        "barrier": "having a baby in one arm",
        "data": "your camera footage and home data",
        "cost": "the cost of the smart thermostat and cameras",
        "peer": "other new parents",
        "extra": [
            ("usable", "How easy is it to turn up the nursery heating with one thumb in the dark?"),
            (
                "credible",
                "How confident are you that the baby-monitor footage is not seen by "
                "anyone outside your family?",
            ),
        ],
        "wrong": (
            "valuable",
            "How much has HomeHub helped you manage the heating in your office building?",
        ),
    },
    {
        "info": "Ana is a 48-year-old hospital cleaner who works split shifts and whose first "
        "language is Portuguese; her English is basic. She uses an inexpensive Android phone "
        "with little storage and buys tickets and checks timetables with the CityMove public "
        "transport app. Her goal is to buy the cheapest tickets and to get to work on time.",
        "state": "At a bus stop at 5:30 am, her bus is late and she wants to know whether to "
        "take another route.",
        "role": "a shift worker who commutes by bus",
        "app": "CityMove",
        "device": "your phone",
        "tasks": ["buying a day ticket", "checking live bus times", "finding another route"],
        "feature": "the live departures board",
        "content": "live bus times and ticket prices",
        "goal": "getting to work on time as cheaply as possible",
        "situation": "when your bus is late early in the morning",
        "aid": "a Portuguese language option",
        "need": "your preference for reading in Portuguese",
        "barrier": "long English instructions",
        "data": "your payment details",
        "cost": "the storage space it takes on your phone",
        "peer": "colleagues who also travel by bus",
        "extra": [
            ("accessible", "Can you use CityMove in Portuguese, or with simple English?"),
            (
                "useful",
                "When your bus is late, does CityMove suggest another way to get to work on time?",
            ),
        ],
        "wrong": (
            "useful",
            "How useful is CityMove for finding parking near the hospital for your car?",
        ),
    },
    {
        "info": "Hiroshi is a 63-year-old architect close to retirement. He sketches and "
        "annotates site photos in the SketchNote app on an iPad Pro with an Apple Pencil, and "
        "shares sketches with clients from his iPhone. He has presbyopia and uses reading "
        "glasses. His goal is to capture design ideas on site and send them to clients the "
        "same day.",
        "state": "On a building-site visit in bright sunlight, trying to annotate a photo of "
        "a facade without his reading glasses.",
        "role": "an architect",
        "app": "SketchNote",
        "device": "your iPad Pro",
        "tasks": [
            "annotating a site photo",
            "sharing a sketch with a client",
            "organising sketches by project",
        ],
        "feature": "the pencil tools",
        "content": "your sketches and project folders",
        "goal": "sharing design ideas with clients on the same day",
        "situation": "when you are on site in bright sunlight",
        "aid": "the Apple Pencil and larger interface text",
        "need": "the fact that you need reading glasses for small text",
        "barrier": "glare from bright sunlight",
        "data": "your clients' project drawings",
        "cost": "the price of the pro version",
        "peer": "other architects",
        "extra": [
            (
                "desirable",
                "How much do you enjoy the feel of drawing with the Apple Pencil in SketchNote?",
            ),
            ("findable", "How easy is it to find an old site sketch when a client asks about it?"),
        ],
        "wrong": (
            "accessible",
            "Can you use SketchNote comfortably with the mouse you use "
            "because of your wrist injury?",
        ),
    },
    {
        "info": "Chloe is a 19-year-old first-year university student with social anxiety. "
        "She uses the CalmMind wellbeing app on her iPhone for guided breathing, sleep "
        "stories and a daily mood journal. Her goal is to manage anxiety before presentations "
        "and to sleep better during term.",
        "state": "Lying in bed at midnight, unable to sleep, anxious about a seminar "
        "presentation tomorrow morning.",
        "role": "a first-year student",
        "app": "CalmMind",
        "device": "your iPhone",
        "tasks": [
            "starting a breathing exercise",
            "writing in your mood journal",
            "playing a sleep story",
        ],
        "feature": "the sleep stories",
        "content": "your mood history and exercises",
        "goal": "managing your anxiety before presentations",
        "situation": "when you cannot sleep because of anxiety",
        "aid": "a dark mode and calm sounds",
        "need": "the effect of anxiety on your concentration",
        "barrier": "bright screens and busy layouts late at night",
        "data": "your mood journal entries",
        "cost": "the annual subscription",
        "peer": "friends who also feel anxious",
        "extra": [
            (
                "useful",
                "How much does a CalmMind breathing exercise help you calm down the "
                "night before a presentation?",
            ),
            ("credible", "How comfortable are you writing private thoughts in the mood journal?"),
        ],
        "wrong": (
            "valuable",
            "Is CalmMind a good use of the wellbeing budget your employer gives you?",
        ),
    },
    {
        "info": "Marcus is a 55-year-old regional sales manager who flies several times a "
        "month. He has an essential tremor that makes small touch targets hard to hit. He "
        "uses the TripWise travel-booking app on his iPhone and a Windows laptop. His goal is "
        "to rebook quickly when flights are delayed or cancelled.",
        "state": "At a crowded airport gate just after his flight was cancelled, trying to "
        "rebook before the queue at the service desk grows.",
        "role": "a frequent business traveller",
        "app": "TripWise",
        "device": "your iPhone",
        "tasks": ["rebooking a cancelled flight", "checking in", "finding your booking"],
        "feature": "the rebooking options",
        "content": "your bookings and flight status",
        "goal": "getting to your meetings despite delays",
        "situation": "when your flight has just been cancelled",
        "aid": "larger touch targets",
        "need": "your tremor",
        "barrier": "small buttons that are close together",
        "data": "your passport and payment details",
        "cost": "the booking fees",
        "peer": "colleagues who travel for work",
        "extra": [
            (
                "usable",
                "How easy is it to choose a new flight with your tremor when the "
                "buttons are close together?",
            ),
            (
                "valuable",
                "Has TripWise ever saved you from missing a meeting after a cancellation?",
            ),
        ],
        "wrong": ("usable", "How easy is it to rebook with TripWise on your Android tablet?"),
    },
    {
        "info": "Ingrid is a 70-year-old retired nurse who runs a book club at her local "
        "library. She borrows e-books and audiobooks with the Libby app on an Amazon Fire "
        "tablet. She has a cataract in her left eye and uses high-contrast mode and large "
        "text. Her goal is to borrow the book club's title for each month in time.",
        "state": "Sitting in her garden in the afternoon, trying to place a hold on next "
        "month's book-club title before the waiting list fills.",
        "role": "a retired nurse who runs a book club",
        "app": "Libby",
        "device": "your Fire tablet",
        "tasks": ["placing a hold", "borrowing an audiobook", "returning a book early"],
        "feature": "the holds list",
        "content": "your loans and holds",
        "goal": "getting each month's book-club title in time",
        "situation": "when you are reading outdoors in daylight",
        "aid": "high-contrast mode and large text",
        "need": "the cataract in your left eye",
        "barrier": "low-contrast text",
        "data": "your library card and reading history",
        "cost": "the time you spend waiting for holds",
        "peer": "members of your book club",
        "extra": [
            ("findable", "How easy is it to find the large-print or audiobook edition of a title?"),
            ("useful", "Does Libby tell you clearly how long you will wait for a book on hold?"),
        ],
        "wrong": ("desirable", "How much do you like the look of Libby on your Kindle Paperwhite?"),
    },
    {
        "info": "Yusuf is a 26-year-old who arrived in the country a year ago as a refugee and "
        "is still learning English. He holds a forklift licence. He uses the JobFinder app on "
        "an Android phone that he shares with his brother, mostly on free library Wi-Fi. His "
        "goal is to find a full-time warehouse job.",
        "state": "In a public library on free Wi-Fi, filling in a job application before the "
        "library closes in 20 minutes.",
        "role": "a job seeker with a forklift licence",
        "app": "JobFinder",
        "device": "your shared phone",
        "tasks": [
            "searching for warehouse jobs",
            "filling in an application",
            "uploading your forklift licence",
        ],
        "feature": "the application form",
        "content": "job adverts and application status",
        "goal": "finding a full-time warehouse job",
        "situation": "when the library is about to close",
        "aid": "simple English and translation",
        "need": "the fact that English is your second language",
        "barrier": "difficult words and long forms",
        "data": "your CV and identity documents",
        "cost": "the time you spend on applications",
        "peer": "friends who are also looking for work",
        "extra": [
            (
                "usable",
                "Can you save a half-finished application and continue later on the shared phone?",
            ),
            ("credible", "Do you feel safe uploading your identity documents to JobFinder?"),
        ],
        "wrong": (
            "findable",
            "How easy is it to find graduate jobs that match your university degree?",
        ),
    },
    {
        "info": "Beatriz is a 37-year-old physiotherapist who is recovering from knee surgery "
        "and follows a rehabilitation programme in the PhysioPlan app. She uses an Android "
        "phone, often propped on the floor, and casts exercise videos to her TV. Her goal is "
        "to return to running in three months.",
        "state": "In her living room doing her evening rehab exercises, with the phone on the "
        "floor and her knee sore.",
        "role": "a physiotherapist in rehabilitation",
        "app": "PhysioPlan",
        "device": "your Android phone",
        "tasks": [
            "following an exercise video",
            "logging your pain level",
            "sending progress to your physiotherapist",
        ],
        "feature": "the exercise videos",
        "content": "your exercise plan and progress",
        "goal": "returning to running after knee surgery",
        "situation": "when you are on the floor doing exercises",
        "aid": "casting videos to your TV and voice prompts",
        "need": "the fact that you cannot easily reach the phone during exercises",
        "barrier": "being on the floor away from the screen",
        "data": "your health and progress records",
        "cost": "the time you spend on exercises each day",
        "peer": "other patients recovering from knee surgery",
        "extra": [
            (
                "usable",
                "Can you pause or repeat an exercise video without getting up from the floor?",
            ),
            (
                "credible",
                "As a physiotherapist yourself, how far do you trust the exercise "
                "instructions in PhysioPlan?",
            ),
        ],
        "wrong": (
            "useful",
            "How well does PhysioPlan support the rehabilitation of your shoulder injury?",
        ),
    },
    {
        "info": "Samuel is a 44-year-old self-employed plumber. He uses the InvoiceNow app on "
        "a rugged Android phone to write quotes and send invoices from customers' homes. His "
        "hands are often wet or dirty, and he sometimes wears work gloves. He has no "
        "accessibility needs. His goal is to send invoices before he leaves a job so he gets "
        "paid faster.",
        "state": "Kneeling under a sink at a customer's house, wanting to send the invoice "
        "before he packs up.",
        "role": "a self-employed plumber",
        "app": "InvoiceNow",
        "device": "your rugged Android phone",
        "tasks": ["sending an invoice", "writing a quote", "checking which invoices are unpaid"],
        "feature": "the invoice template",
        "content": "your invoices and payments",
        "goal": "getting paid faster",
        "situation": "while you are still at a customer's house",
        "aid": "use with wet hands or work gloves",
        "need": "the fact that your hands are often wet or dirty",
        "barrier": "wet hands or work gloves",
        "data": "your customers' details and bank information",
        "cost": "the monthly fee",
        "peer": "other tradespeople",
        "extra": [
            (
                "useful",
                "Can you add parts and labour to an invoice straight from the job "
                "without going back to the van?",
            ),
            ("valuable", "Since you started using InvoiceNow, do customers pay you sooner?"),
        ],
        "wrong": (
            "accessible",
            "Does InvoiceNow work well with the dyslexia support tools you use?",
        ),
    },
]

# ---------------------------------------------------------------------------------------------
# Personalised question templates (UEQ-mLLM). Slots come from the user; {task0}..{task2} are a
# per-record shuffle of the user's tasks.
# ---------------------------------------------------------------------------------------------

PERSONAL = {
    "useful": [
        "How well does {app} support you in {task0}?",
        "Does {app} give you all the information you need for {task1}, such as {content}?",
        "How much does {app} help you with {goal}?",
        "How useful is {feature} to you?",
        "Is there anything you still have to do outside {app} when {task0}?",
        "How well does {app} fit into your daily routine as {role}?",
        "Does {app} solve a real problem for you, or could you manage just as well without it?",
        "How relevant are the features of {app} to {goal}?",
        "Which function of {app} do you rely on most for {task1}?",
        "Does {app} cover everything you need for {task2}?",
        "How often does {app} help you get something important done?",
    ],
    "usable": [
        "How easy is {task0} in {app} on {device}?",
        "How many steps does {task1} take in {app}, and does that feel like too many?",
        "How easy was it to learn to use {feature} when you first tried it?",
        "How easy is {app} to operate {situation}?",
        "How often do you tap the wrong button or make other mistakes when using {feature}?",
        "When something goes wrong during {task2}, how easy is it to recover and carry on?",
        "How comfortable is the size of the buttons in {app} on {device}?",
        "Does {app} behave consistently, so that what you learn on one screen also works on "
        "the others?",
        "How quickly can you finish {task1} when you are in a hurry?",
    ],
    "desirable": [
        "How much do you enjoy using {app} for {task0}?",
        "How appealing do you find the look of {app} on {device}?",
        "Does the visual style of {app} suit you as {role}?",
        "How do you feel about opening {app} {situation}?",
        "Do the colours, icons and images in {app} feel pleasant to you?",
        "Would you be happy to show {app} to {peer}?",
        "How well does the tone of the messages in {app} match your taste?",
        "Does using {feature} feel satisfying, or more like a chore?",
        "How pleasant is the experience of {task1} with {app}?",
        "Do you feel positive about the brand behind {app}?",
        "Does {app} feel friendly and welcoming to you?",
    ],
    "findable": [
        "How easy is it to find {feature} in {app}?",
        "How quickly can you locate {content} {situation}?",
        "When you search within {app}, do the results match what you were looking for?",
        "Do the menu labels in {app} make it clear where to go for {task1}?",
        "How often do you get lost in the menus of {app}?",
        "How easy was it to find and install {app} on {device} in the first place?",
        "When you are in {feature}, is the way back to the start screen obvious?",
        "How easy is it to find help within {app} when you are unsure about {task2}?",
    ],
    "accessible": [
        "How well does {app} support {aid}?",
        "Does {app} take {need} into account?",
        "Is the text in {app} large and clear enough for you to read on {device}?",
        "Can you use {feature} comfortably on {device} {situation}?",
        "Are the colour contrasts in {app} strong enough for you on {device}?",
        "Does {app} still work well if you change the text size or display settings on {device}?",
        "Are sounds, vibrations and on-screen alerts in {app} noticeable enough for you?",
        "Does {app} give you enough time to finish {task1} before it times out?",
        "Are there parts of {app} that you cannot use because of {barrier}?",
        "Does {app} work well with the accessibility settings on {device}?",
    ],
    "credible": [
        "How much do you trust {app} with {data}?",
        "How confident are you in the accuracy of {content} shown in {app}?",
        "Does {app} explain clearly how it uses {data}?",
        "Does the company behind {app} seem trustworthy to you?",
        "Would you rely on {app} for {task0} without double-checking elsewhere?",
        "Do you feel safe logging in to {app} on {device}?",
        "Have you ever noticed information in {app} that turned out to be wrong or out of date?",
        "Do security messages and privacy settings in {app} make you feel your data is protected?",
    ],
    "valuable": [
        "Overall, how much value does {app} add to {goal}?",
        "Is {app} worth {cost}?",
        "How likely are you to recommend {app} to {peer}?",
        "How much time or effort does {app} save you when {task0}?",
        "Would you keep using {app} if a free alternative were available?",
        "How important is {app} in your everyday life as {role}?",
        "If {app} disappeared tomorrow, how much harder would {goal} become?",
        "Compared with how you managed before, how much better off are you with {app}?",
        "How much time or money has {app} saved you over the last month?",
        "If you were starting again today, would you still choose {app}?",
        "Does {app} deliver the benefits you expected when you started using it?",
    ],
}

# ---------------------------------------------------------------------------------------------
# Generic question bank (UEQ-sLLM). {A} is the product, varied per record.
# ---------------------------------------------------------------------------------------------

GENERIC = {
    "useful": [
        "How useful is {A} for your daily tasks?",
        "Does {A} provide the features you need?",
        "How well does {A} help you achieve your goals?",
        "Does {A} solve a real problem for you?",
        "How relevant is the content of {A} to your needs?",
        "Are there important functions that {A} is missing?",
        "How often do you use {A} to get something done?",
        "Does {A} help you complete tasks more effectively?",
    ],
    "usable": [
        "How easy is {A} to use?",
        "How easy was it to learn how to use {A}?",
        "Can you complete tasks in {A} quickly?",
        "How often do you make errors while using {A}?",
        "Is it easy to recover from mistakes in {A}?",
        "Are the steps needed to complete a task in {A} clear?",
        "Does {A} respond quickly to your actions?",
        "Is the layout of {A} consistent from screen to screen?",
        "How much effort does it take to use {A}?",
    ],
    "desirable": [
        "How visually appealing is {A}?",
        "How much do you enjoy using {A}?",
        "Do you like the colours and design of {A}?",
        "Does using {A} give you a positive feeling?",
        "Does the brand of {A} appeal to you?",
        "How modern does {A} feel?",
        "Would you describe {A} as attractive?",
        "Does using {A} feel satisfying?",
    ],
    "findable": [
        "How easy is it to find what you are looking for in {A}?",
        "Is the navigation in {A} clear?",
        "How well does the search function in {A} work?",
        "Are the menu labels in {A} easy to understand?",
        "How easy was it to find {A} in the app store?",
        "Can you easily return to the home screen from anywhere in {A}?",
        "How quickly can you locate a specific feature in {A}?",
        "How easy is it to find help or support within {A}?",
    ],
    "accessible": [
        "Is {A} accessible to people with disabilities?",
        "Is the text in {A} easy to read?",
        "Does {A} work well with screen readers?",
        "Can you adjust the text size in {A}?",
        "Are the colour contrasts in {A} sufficient?",
        "Can {A} be used easily with one hand?",
        "Are the buttons in {A} large enough to tap easily?",
        "Does {A} provide captions for audio and video content?",
    ],
    "credible": [
        "How much do you trust {A}?",
        "Is the information in {A} accurate?",
        "Do you feel your personal data is safe in {A}?",
        "Does {A} seem professional and reliable?",
        "Is it clear who is responsible for {A}?",
        "Do you trust the company behind {A}?",
        "Is {A} transparent about how it uses your data?",
        "Would you rely on the information provided by {A}?",
    ],
    "valuable": [
        "How valuable is {A} to you?",
        "Is {A} worth the money or time you spend on it?",
        "How likely are you to recommend {A} to others?",
        "Does {A} save you time?",
        "Would you continue using {A} in the future?",
        "Does {A} meet your expectations overall?",
        "How would you rate the overall value of {A}?",
        "Would you pay for a premium version of {A}?",
    ],
}

GENERIC_PRODUCT = ["the app", "this app", "the application"]

UNCATEGORISED_HEADING = "Additional questions"
UNCATEGORISED = [
    "How satisfied are you with {A} overall?",
    "Is there anything else you would like to tell us about {A}?",
    "How long have you been using {A}?",
]

# Literal braces that a template engine must never interpret (planted in one record).
BRACE_QUESTIONS = {
    "useful": "Thinking about {{user_info}}, how well does {app} match what you told us about "
    "yourself?",
    "valuable": "{name}, how likely are you to keep using {app} next year?",
}

# One slip per planted record; tried in order until one applies to a question.
SLIPS = {
    "spelling": [
        ("information", "infomation"),
        ("whether", "wether"),
        ("comfortable", "comfortible"),
        ("accurate", "acurate"),
        ("appealing", "appealling"),
        ("enough", "enought"),
        ("navigation", "navigaton"),
        ("recommend", "reccomend"),
        ("easily", "easilly"),
        ("consistent", "consistant"),
    ],
    "grammar": [
        ("Does ", "Do "),
        ("How much do you", "How much does you"),
        ("Is there", "Are there"),
        ("Are the ", "Is the "),
        ("How easy is", "How easy are"),
        ("Would you", "Would you to"),
    ],
}

TITLE = {f: f.capitalize() for f in FACETS}

# A personalised questionnaire uses each of these slots in at most this many questions, so the
# user's situation or goal is not repeated in every facet.
# Questions that could be read as measuring two facets are never used as planted misfiles.
NOT_MOVABLE = ["rely on", "anything you still have to do", "Which function of", "to get something"]

SLOT_CAP = {"situation": 2, "goal": 2, "role": 2, "peer": 1}

# Facet pairs whose questions can overlap; a planted misfile never moves a question between
# them, so every misfiled question clearly belongs elsewhere.
CLOSE = {
    frozenset(pair)
    for pair in [
        ("usable", "accessible"),
        ("usable", "findable"),
        ("useful", "valuable"),
        ("desirable", "valuable"),
    ]
}


def fill(template: str, slots: dict[str, str]) -> str:
    """Fill {slot} names with plain replacement (never str.format), so braces stay literal."""
    return re.sub(r"\{(\w+)\}", lambda m: slots[m.group(1)], template)


def user_slots(user: dict, rng: random.Random) -> dict[str, str]:
    tasks = list(user["tasks"])
    rng.shuffle(tasks)
    slots = {k: v for k, v in user.items() if isinstance(v, str) and k not in ("info", "state")}
    slots.update({f"task{i}": t for i, t in enumerate(tasks)})
    return slots


def choose_defects(rng: random.Random, n_users: int) -> dict[str, dict[int, list[str]]]:
    """Which user indexes get which defect kinds, per condition."""
    plan: dict[str, dict[int, list[str]]] = {}
    for condition, kinds in PLAN.items():
        per_user: dict[int, list[str]] = {i: [] for i in range(n_users)}
        for kind, count in kinds.items():
            for i in sorted(rng.sample(range(n_users), count)):
                per_user[i].append(kind)
        plan[condition] = per_user
    return plan


def apply_slip(sections: dict[str, list[str]], protected: set[str], rng: random.Random) -> str:
    """Introduce one spelling or grammar slip into one question; return its defect tag."""
    kinds = ["spelling", "grammar"]
    rng.shuffle(kinds)
    facets = list(FACETS)
    rng.shuffle(facets)
    for kind in kinds:
        for facet in facets:
            order = list(range(len(sections[facet])))
            rng.shuffle(order)
            for qi in order:
                question = sections[facet][qi]
                if question in protected:
                    continue
                for old, new in SLIPS[kind]:
                    if old in question:
                        sections[facet][qi] = question.replace(old, new, 1)
                        return f"{kind}:{facet}"
    raise RuntimeError("no slip applies")


def build(
    condition: str, user: dict, kinds: list[str], rng: random.Random
) -> tuple[str, list[str]]:
    personal = condition == "UEQ-mLLM"
    if personal:
        slots = user_slots(user, rng)
        bank = PERSONAL
        extras: dict[str, list[str]] = {f: [] for f in FACETS}
        for facet, question in user["extra"]:
            extras[facet].append(question)
    else:
        slots = {"A": rng.choice(GENERIC_PRODUCT)}
        bank = GENERIC
        extras = {f: [] for f in FACETS}

    # Facets that carry a structural defect, chosen so that no two defects share a facet.
    free = list(FACETS)
    rng.shuffle(free)
    few_facet = free.pop() if "few_questions" in kinds else None
    wrong_facet = user["wrong"][0] if "misstates_user" in kinds else None
    if wrong_facet in free:
        free.remove(wrong_facet)
    misfile = None
    if "misfiled" in kinds:
        src = free.pop()
        dst = next(f for f in free if frozenset((src, f)) not in CLOSE)
        free.remove(dst)
        misfile = (src, dst)

    templates = {f: list(bank[f]) for f in FACETS}
    if personal:
        skip = user.get("skip", [])
        templates = {
            f: [q for q in ts if not any(s in q for s in skip)] for f, ts in templates.items()
        }
        for slot, cap in SLOT_CAP.items():
            using = [q for f in FACETS for q in templates[f] if "{" + slot + "}" in q]
            keep = set(rng.sample(using, min(cap, len(using))))
            templates = {
                f: [q for q in ts if q in keep or "{" + slot + "}" not in q]
                for f, ts in templates.items()
            }

    sections: dict[str, list[str]] = {}
    moved = ""  # the question planted as a misfile, taken out of its own facet's pool
    for facet in FACETS:
        if facet == few_facet:
            n = rng.randint(3, 4)
        elif misfile and facet == misfile[1]:
            n = rng.randint(4, 6)  # the misfiled question makes it 5 to 7
        else:
            n = rng.randint(5, 7)
        own = [fill(q, slots) for q in extras[facet]][:n]
        pool = [fill(q, slots) for q in templates[facet]]
        rng.shuffle(pool)
        if misfile and facet == misfile[0]:
            moved = next(q for q in pool if not any(s in q for s in NOT_MOVABLE))
            pool.remove(moved)
        picked = own + pool[: n - len(own)]
        if len(picked) < n:
            raise RuntimeError(f"template pool too small for {facet}")
        rng.shuffle(picked)
        sections[facet] = picked

    defects: list[str] = []
    protected: set[str] = set()
    if few_facet:
        defects.append(f"few_questions:{few_facet}")
    if misfile:
        src, dst = misfile
        pos = rng.randint(0, len(sections[dst]))
        sections[dst].insert(pos, moved)
        protected.add(moved)
        defects.append(f"misfiled:{src}->{dst}")
    if wrong_facet:
        question = user["wrong"][1]
        qi = rng.choice([j for j, q in enumerate(sections[wrong_facet]) if q not in protected])
        sections[wrong_facet][qi] = question
        protected.add(question)
        defects.append(f"misstates_user:{wrong_facet}")
    if "literal_braces" in kinds:
        for facet, template in BRACE_QUESTIONS.items():
            # Only {app} is filled; "{{user_info}}" and "{name}" stay literal.
            question = template.replace("{app}", slots.get("app", slots.get("A", "the app")))
            qi = rng.choice([j for j, q in enumerate(sections[facet]) if q not in protected])
            sections[facet][qi] = question
            protected.add(question)
            defects.append(f"literal_braces:{facet}")
    if "slip" in kinds:
        defects.append(apply_slip(sections, protected, rng))

    blocks = []
    for facet in FACETS:
        lines = [f"{TITLE[facet]}:"]
        lines += [f"{i}. {q}" for i, q in enumerate(sections[facet], 1)]
        blocks.append("\n".join(lines))
    if "uncategorised" in kinds:
        n = 2
        extra = rng.sample(UNCATEGORISED, n)
        lines = [f"{UNCATEGORISED_HEADING}:"]
        lines += [f"{i}. {fill(q, slots)}" for i, q in enumerate(extra, 1)]
        blocks.append("\n".join(lines))
        defects.append(f"uncategorised:{n}")
    return "\n\n".join(blocks), defects


def main() -> None:
    rng = random.Random(SEED)
    plan = choose_defects(rng, len(USERS))
    lines = []
    tally: dict[str, Counter[str]] = {c: Counter() for c in PLAN}
    for i, user in enumerate(USERS):
        uid = f"u{i + 1:02d}"
        for condition in PLAN:
            questionnaire, defects = build(condition, user, plan[condition][i], rng)
            tally[condition].update({d.split(":")[0] for d in defects})
            record = {
                "id": f"{uid}-{condition.split('-')[1]}",
                "user": uid,
                "condition": condition,
                "user_info": user["info"],
                "user_state": user["state"],
                "questionnaire": questionnaire,
                "defects": defects,
            }
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    with OUT.open("w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(lines)
    print(f"wrote {len(lines)} records to {OUT}; records with each defect kind:")
    for condition, counts in tally.items():
        print(f"  {condition}: {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
