import { element, replaceChildren } from "./dom.js";

/**
 * Asks the user to approve a nested call the gateway flagged (its `tools.approval` list), in a modal
 * `<dialog>`. Escape or closing the dialog counts as a decline.
 */
export function createApprovalPrompt(dialog: HTMLDialogElement): (message: string) => Promise<boolean> {
  return (message) =>
    new Promise<boolean>((resolve) => {
      const approve = element(
        "button",
        { type: "button", className: "primary", value: "approve" },
        "Approve",
      );
      const decline = element("button", { type: "button", value: "decline" }, "Decline");
      replaceChildren(
        dialog,
        element("h2", { id: "approval-title" }, "Approve a nested call?"),
        element("p", { className: "approval-message" }, message),
        element("div", { className: "dialog-actions" }, decline, approve),
      );
      const finish = (approved: boolean) => {
        dialog.removeEventListener("close", onClose);
        if (dialog.open) dialog.close();
        resolve(approved);
      };
      const onClose = () => finish(false);
      dialog.addEventListener("close", onClose);
      approve.addEventListener("click", () => finish(true));
      decline.addEventListener("click", () => finish(false));
      dialog.showModal();
      decline.focus();
    });
}
