"""What a history's messages say, read without an LLM: the floor that layers, strategies and
summarizers stand on.

- :mod:`.actions`: the one vocabulary of tool actions (which tools read, write, edit, run,
  search or plan) and :class:`ToolAction`, a call read as a read, an edit or a run;
- :mod:`.shell`: what a shell command does to files, from its text;
- :mod:`.readers`: exit statuses, error lines, plans and findings;
- :mod:`.mentions`: the files and code names a span has in play;
- :mod:`.working`: where the agent edited, with the file's lines around each edit;
- :mod:`.sections`: the four sections of a summary (an earlier summary is part of a history);
- :mod:`.facts`: all of the above for a span, in one :class:`Facts` value.

Pure functions of immutable values; nothing here imports a layer, a strategy or a summarizer.
"""
