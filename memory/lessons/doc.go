// Package lessons owns the knowledge items that feedback teaches: their
// lifecycle (the Learner turns feedback.interpreted into lesson.* events)
// and their use (the View, a projection of lesson.* events, says which
// promoted lessons apply to a request, so that the gateway can place them
// in its context: fast memory).
//
// A lesson is a statement with a scope and evidence. Two kinds:
//
//   - fact: from customers' corrections. The statement is the question it
//     was taught on and the value the customers say is right ("For "When
//     does the museum open?": the right answer is 9am."). Its scope is
//     a tenant, a task type and a memory cluster: the questions whose
//     embedding is close to one of the lesson's anchors (the questions of
//     the feedback that taught it) and that state no number the anchor
//     does not (a correction of "what is 17 + 25" says nothing of
//     "19 + 23").
//   - guidance: from the hints customers' comments carry ("Be more
//     concise."). Its scope is the user who gave it.
//
// The evidence rules (Config, with these defaults):
//
//   - A lesson never applies outside its tenant, and a guidance lesson
//     never to another user than its own.
//   - Each user counts once: the latest claim a user made in a cluster is
//     that user's vote there, however often it was repeated.
//   - A fact lesson is promoted when at least MinUsers (2) users vote for
//     its value and they are at least Majority (2) times as many as the
//     users who voted for another value in the cluster since its last
//     promotion. A single customer's claim stays a proposal.
//   - A promoted fact lesson supersedes the promoted lessons of its
//     cluster with another value (values that state one another, "9am"
//     and "Yes, the museum opens at 9am.", agree).
//   - A guidance lesson is promoted once its user gave the same hint on
//     MinRepeats (2) interactions, and only from feedback about how to
//     answer (length, tone, format, completeness, tool use): a complaint
//     that an answer was wrong, without the right answer, is no guidance.
//   - A promoted guidance lesson is on trial: once it was in the context
//     of TrialInteractions (20) evaluated interactions, their mean reward
//     is compared with its user's recent interactions without lessons;
//     more than TrialMargin (0.1) below, the lesson is retired as not
//     helping. A fact lesson is judged by the customers' corrections
//     instead (a contradicting one supersedes it).
//   - Only interpretations that are not uncertain count
//     (feedback.interpreted uncertain, ADR 0010).
//   - Retirement comes from outside: the distiller appends lesson.retired
//     once promoted weights answer the lesson's anchors as well without it
//     in the context as with it; an operator may retire a lesson at any
//     time.
//
// The learner's state is rebuilt from the store by Rebuild: lesson.*
// events give the lifecycle, feedback.interpreted events (with their
// interactions) the votes. Event ids are deterministic, so handling a
// feedback twice appends nothing new.
package lessons
