CREATE TABLE "corq"."cell_slots" (
	"slot" integer PRIMARY KEY NOT NULL,
	"epoch" integer NOT NULL,
	"state" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
