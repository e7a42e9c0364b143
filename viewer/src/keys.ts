// The keyboard: shortcuts for the graph, the gates and the panels.
import { toggleTimeline, toggleTimelineOnly } from './timeline-panel';
import { foldBy } from './folds';
import { invalidate, S } from './store';
import { currentPause, may, NEEDS_TOKEN, openEditor, resume, step } from './control';
import { fit } from './camera';
import { toggleFilter } from './filters';
import { closePalette, openPalette, P, refreshPalette } from './palette';
import { copyLink, cycleTheme, rearrange, toast, toggleAllFolds, toggleRail } from './actions';
import { selectNode } from './routing';

const $ = (id: string) => document.getElementById(id)!;

function typing(e: KeyboardEvent): boolean {
  const t = e.target as HTMLElement | null;
  return !!t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable);
}

/** The keyboard shortcuts (none while typing, or with a modifier but ⌘K). */
export function onKey(e: KeyboardEvent): void {
  if ((e.metaKey || e.ctrlKey) && e.key.toLowerCase() === 'k') {
    e.preventDefault();
    $('palette').hidden ? openPalette('') : closePalette();
    return;
  }
  if (!$('palette').hidden) {
    if (e.key === 'Escape') closePalette();
    else if (e.key === 'ArrowDown') {
      P.sel = Math.min(P.items.length - 1, P.sel + 1);
      refreshPalette();
      e.preventDefault();
    } else if (e.key === 'ArrowUp') {
      P.sel = Math.max(0, P.sel - 1);
      refreshPalette();
      e.preventDefault();
    } else if (e.key === 'Enter') {
      const it = P.items[P.sel];
      closePalette();
      it?.run();
      e.preventDefault();
    }
    return;
  }
  if (!$('modal').hidden || typing(e)) return;
  if (e.metaKey || e.ctrlKey || e.altKey) return;
  const pause = currentPause();
  switch (e.key) {
    case '/':
      e.preventDefault();
      openPalette('');
      return;
    case '>':
      e.preventDefault();
      openPalette('>');
      return;
    case 'Escape':
      selectNode(undefined, false);
      return;
    case 'f':
      S.follow = !S.follow;
      toast(S.follow ? 'following the active node' : 'follow off');
      invalidate({ graph: true });
      return;
    case 'F':
      fit();
      return;
    case 'T':
      toggleTimeline();
      return;
    case 'O':
      toggleTimelineOnly();
      return;
    case 'E':
      toggleFilter('errorPath');
      return;
    case 'A':
      rearrange();
      return;
    case 'G':
      foldBy('agent', toast);
      return;
    case 'H':
      foldBy('chain', toast);
      return;
    case 'C':
      toggleAllFolds();
      return;
    case 'L':
      copyLink();
      return;
    case 'b':
      toggleRail();
      return;
    case 'd':
      cycleTheme();
      return;
  }
  if (!pause || S.embedded) return;
  switch (e.key) {
    case 'c':
      resume(pause, 'continue');
      break;
    case 's':
      if (may('debug')) step(pause);
      else toast(NEEDS_TOKEN, 'warn');
      break;
    case 'r':
      resume(pause, 'retry');
      break;
    case 'i':
      e.preventDefault();
      if (may('inject')) openEditor(pause, 'inject');
      else toast(NEEDS_TOKEN, 'warn');
      break;
  }
}
