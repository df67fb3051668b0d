import type { CodeModeLanguage } from "@codecell/contract";
import {
  autocompletion,
  closeBrackets,
  closeBracketsKeymap,
  completionKeymap,
} from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { javascript } from "@codemirror/lang-javascript";
import { bracketMatching, HighlightStyle, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { Compartment, EditorState, type Extension, Prec, StateEffect, StateField } from "@codemirror/state";
import {
  Decoration,
  type DecorationSet,
  drawSelection,
  EditorView,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { tags } from "@lezer/highlight";

const highlightStyle = HighlightStyle.define([
  { tag: tags.comment, color: "#6a737d", fontStyle: "italic" },
  { tag: [tags.keyword, tags.controlKeyword, tags.moduleKeyword, tags.operatorKeyword], color: "#8839ef" },
  { tag: [tags.string, tags.special(tags.string)], color: "#2f7d32" },
  { tag: [tags.number, tags.bool, tags.null], color: "#c2410c" },
  { tag: [tags.typeName, tags.className, tags.namespace], color: "#0e7490" },
  { tag: [tags.function(tags.variableName), tags.function(tags.propertyName)], color: "#1d4ed8" },
  { tag: tags.propertyName, color: "#334155" },
  { tag: tags.definition(tags.variableName), color: "#0f172a", fontWeight: "600" },
  { tag: tags.regexp, color: "#b91c1c" },
  { tag: tags.invalid, color: "#dc2626" },
]);

const theme = EditorView.theme({
  "&": { height: "100%", fontSize: "13.5px", backgroundColor: "#ffffff" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  ".cm-gutters": { backgroundColor: "#f8fafc", color: "#94a3b8", borderRight: "1px solid #e2e8f0" },
  ".cm-activeLine": { backgroundColor: "#f1f5f9" },
  ".cm-activeLineGutter": { backgroundColor: "#e2e8f0", color: "#334155" },
  ".cm-error-line": { backgroundColor: "#fee2e2" },
  ".cm-error-line.cm-activeLine": { backgroundColor: "#fecaca" },
  "&.cm-focused": { outline: "2px solid var(--focus)", outlineOffset: "-2px" },
});

const setErrorLine = StateEffect.define<number | null>();
const errorLineDecoration = Decoration.line({ class: "cm-error-line" });

/** The line a failed result points to, highlighted until the cell is edited or run again. */
const errorLineField = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(decorations, transaction) {
    if (transaction.docChanged) return Decoration.none;
    for (const effect of transaction.effects) {
      if (!effect.is(setErrorLine)) continue;
      const line = effect.value;
      if (line === null || line < 1 || line > transaction.state.doc.lines) return Decoration.none;
      return Decoration.set([errorLineDecoration.range(transaction.state.doc.line(line).from)]);
    }
    return decorations;
  },
  provide: (field) => EditorView.decorations.from(field),
});

function languageSupport(language: CodeModeLanguage): Extension {
  return javascript({ typescript: language === "typescript" });
}

export type CellEditorOptions = {
  doc: string;
  language: CodeModeLanguage;
  onRun: () => void;
  onWait: () => void;
  onChange?: (code: string) => void;
};

/** The cell editor: CodeMirror 6 with JS/TS highlighting, Mod-Enter to run, Mod-Shift-Enter to wait. */
export class CellEditor {
  readonly view: EditorView;
  readonly #language = new Compartment();

  constructor(parent: HTMLElement, options: CellEditorOptions) {
    const shortcuts = Prec.highest(
      keymap.of([
        {
          key: "Mod-Enter",
          run: () => {
            options.onRun();
            return true;
          },
        },
        {
          key: "Mod-Shift-Enter",
          run: () => {
            options.onWait();
            return true;
          },
        },
      ]),
    );
    this.view = new EditorView({
      parent,
      state: EditorState.create({
        doc: options.doc,
        extensions: [
          shortcuts,
          lineNumbers(),
          highlightActiveLineGutter(),
          highlightSpecialChars(),
          history(),
          drawSelection(),
          indentOnInput(),
          bracketMatching(),
          closeBrackets(),
          autocompletion(),
          highlightActiveLine(),
          syntaxHighlighting(highlightStyle),
          // Tab indents; Escape then Tab moves focus out of the editor (CodeMirror's tab-focus rule).
          keymap.of([
            ...closeBracketsKeymap,
            ...defaultKeymap,
            ...historyKeymap,
            ...completionKeymap,
            indentWithTab,
          ]),
          this.#language.of(languageSupport(options.language)),
          errorLineField,
          EditorView.lineWrapping,
          theme,
          EditorView.contentAttributes.of({ "aria-label": "Cell code", "data-testid": "editor-content" }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) options.onChange?.(update.state.doc.toString());
          }),
        ],
      }),
    });
  }

  get code(): string {
    return this.view.state.doc.toString();
  }

  setCode(code: string): void {
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: code } });
  }

  setLanguage(language: CodeModeLanguage): void {
    this.view.dispatch({ effects: this.#language.reconfigure(languageSupport(language)) });
  }

  /** Highlights `line` (1-based) and, when `reveal`, moves the cursor there and scrolls it into view. */
  markErrorLine(line: number | null, reveal = false): void {
    const effects: StateEffect<unknown>[] = [setErrorLine.of(line)];
    if (line !== null && line >= 1 && line <= this.view.state.doc.lines && reveal) {
      const position = this.view.state.doc.line(line).from;
      effects.push(EditorView.scrollIntoView(position, { y: "center" }));
      this.view.dispatch({ effects, selection: { anchor: position } });
      this.view.focus();
      return;
    }
    this.view.dispatch({ effects });
  }

  focus(): void {
    this.view.focus();
  }
}

/** A read-only TypeScript view for declaration files. */
export function createDeclarationViewer(parent: HTMLElement, text: string): EditorView {
  return new EditorView({
    parent,
    state: EditorState.create({
      doc: text,
      extensions: [
        lineNumbers(),
        EditorState.readOnly.of(true),
        javascript({ typescript: true }),
        syntaxHighlighting(highlightStyle),
        EditorView.lineWrapping,
        theme,
        EditorView.contentAttributes.of({ "aria-label": "Declaration file" }),
      ],
    }),
  });
}
